import Foundation

/// Finds the pages of an LMDB data file that the environment uses but the file doesn't hold.
///
/// The file may legitimately end before page `last_pgno`: a commit doesn't write pages it
/// allocated and freed again ("loose" pages), so the tail can be free pages never written
/// (LMDB's own `mdb_env_copy` clips its copy to the file's size for that reason). A page
/// past the end that is **not** free is one the B-trees reach, and reading it through the
/// map is a `SIGBUS`. This check reads the file with `pread`-style reads only — never through
/// the map — so it is safe on a truncated file.
///
/// Layout read here is LMDB 0.9's on-disk format for 64-bit builds (`pgno_t` and `txnid_t`
/// of 8 bytes, 16-byte page header, little-endian): the two meta pages, then the free-page
/// database's B-tree (branch, leaf and overflow pages) and its lists of free page numbers.
/// Anything that doesn't match that format (a meta page other than the one LMDB picked, a
/// page of the wrong kind) makes the check give up: it only ever refuses a file on evidence.
struct LMDBFileCheck {
    let file: FileHandle
    let fileSize: Int
    let pageSize: Int

    /// What the check found.
    enum Finding: Equatable {
        /// Every page past the end of the file is free (or none is past it).
        case complete
        /// Page `page`, past the end of the file, is in use.
        case missing(page: Int)
        /// The file's structure couldn't be read as expected: no conclusion.
        case undetermined
    }

    /// Checks the pages `fileSize / pageSize … lastPage` given the newest meta page's
    /// `lastPage` and `transactionID` (from `mdb_env_info`, to confirm this reads the same).
    func check(lastPage: Int, transactionID: Int) -> Finding {
        let pagesInFile = fileSize / pageSize
        if lastPage < pagesInFile { return .complete }
        guard let meta = newestMeta(), meta.lastPage == lastPage, meta.transactionID == transactionID else {
            return .undetermined
        }
        // The main database's root is written at every commit that changes anything.
        if meta.mainRoot != Self.noPage, meta.mainRoot >= pagesInFile { return .missing(page: meta.mainRoot) }
        guard let free = freePages(root: meta.freeRoot, pagesInFile: pagesInFile, lastPage: lastPage) else {
            return .undetermined
        }
        if case .missing = free.finding { return free.finding }
        for page in pagesInFile...lastPage where !free.pages.contains(page) {
            return .missing(page: page)
        }
        return .complete
    }

    // MARK: - Reading the file

    static let pageHeaderSize = 16
    static let noPage = Int(bitPattern: UInt(UInt64.max))
    static let metaMagic: UInt32 = 0xBEEF_C0DE

    private func bytes(at offset: Int, count: Int) -> [UInt8]? {
        guard offset >= 0, count >= 0, offset + count <= fileSize else { return nil }
        do {
            try file.seek(toOffset: UInt64(offset))
            guard let data = try file.read(upToCount: count), data.count == count else { return nil }
            return [UInt8](data)
        } catch {
            return nil
        }
    }

    private static func u16(_ b: [UInt8], _ at: Int) -> Int { Int(b[at]) | Int(b[at + 1]) << 8 }
    private static func u32(_ b: [UInt8], _ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(b[at + $1]) << (8 * $1) } }
    private static func u64(_ b: [UInt8], _ at: Int) -> Int {
        Int(bitPattern: UInt((0..<8).reduce(UInt64(0)) { $0 | UInt64(b[at + $1]) << (8 * UInt64($1)) }))
    }

    struct Meta {
        let freeRoot: Int
        let mainRoot: Int
        let lastPage: Int
        let transactionID: Int
    }

    /// The meta page (0 or 1) with the higher transaction ID, as `mdb_env_pick_meta` picks.
    private func newestMeta() -> Meta? {
        var best: Meta?
        for index in 0..<2 {
            // MDB_meta at the page header: magic, version, address, mapsize, 2 × MDB_db (48
            // bytes: pad, flags, depth, 4 counts, root), last page, transaction ID.
            guard let b = bytes(at: index * pageSize + Self.pageHeaderSize, count: 136),
                Self.u32(b, 0) == Self.metaMagic
            else { return nil }
            let meta = Meta(freeRoot: Self.u64(b, 24 + 40), mainRoot: Self.u64(b, 72 + 40), lastPage: Self.u64(b, 120), transactionID: Self.u64(b, 128))
            if best.map({ meta.transactionID > $0.transactionID }) ?? true { best = meta }
        }
        return best
    }

    /// The page numbers the free-page database lists, with `.missing` if one of its own
    /// pages is past the end of the file; nil when its pages don't read as expected.
    private func freePages(root: Int, pagesInFile: Int, lastPage: Int) -> (pages: Set<Int>, finding: Finding)? {
        var pages: Set<Int> = []
        if root == Self.noPage { return (pages, .complete) }
        var pending = [root]
        var visited = 0
        while let number = pending.popLast() {
            guard number >= 2, number <= lastPage else { return nil }
            if number >= pagesInFile { return (pages, .missing(page: number)) }
            visited += 1
            guard visited <= lastPage, let page = bytes(at: number * pageSize, count: pageSize) else { return nil }
            let flags = Self.u16(page, 10)
            let lower = Self.u16(page, 12)
            guard lower >= Self.pageHeaderSize, lower <= pageSize else { return nil }
            let keys = (lower - Self.pageHeaderSize) / 2
            for i in 0..<keys {
                let node = Self.u16(page, Self.pageHeaderSize + 2 * i)
                guard node + 8 <= pageSize else { return nil }
                let lo = Self.u16(page, node), hi = Self.u16(page, node + 2), nodeFlags = Self.u16(page, node + 4)
                let keySize = Self.u16(page, node + 6)
                if flags & 0x01 != 0 {  // P_BRANCH: the child's page number is in lo, hi, flags.
                    pending.append(lo | hi << 16 | nodeFlags << 32)
                } else if flags & 0x02 != 0 {  // P_LEAF: key = transaction ID, data = IDL.
                    let dataSize = lo | hi << 16
                    let dataStart = node + 8 + keySize
                    let data: [UInt8]
                    if nodeFlags & 0x01 != 0 {  // F_BIGDATA: the list is on overflow pages.
                        guard dataStart + 8 <= pageSize else { return nil }
                        let overflow = Self.u64(page, dataStart)
                        guard overflow >= 2, overflow <= lastPage else { return nil }
                        guard let header = bytes(at: overflow * pageSize, count: Self.pageHeaderSize) else {
                            return (pages, .missing(page: overflow))
                        }
                        let count = Int(Self.u32(header, 12))
                        guard Self.u16(header, 10) & 0x04 != 0, count >= 1 else { return nil }
                        if overflow + count - 1 >= pagesInFile { return (pages, .missing(page: max(overflow, pagesInFile))) }
                        guard let body = bytes(at: overflow * pageSize + Self.pageHeaderSize, count: dataSize) else { return nil }
                        data = body
                    } else {
                        guard dataStart + dataSize <= pageSize else { return nil }
                        data = Array(page[dataStart..<(dataStart + dataSize)])
                    }
                    guard data.count >= 8 else { return nil }
                    let count = Self.u64(data, 0)
                    guard count >= 0, 8 + count * 8 <= data.count else { return nil }
                    for j in 0..<count { pages.insert(Self.u64(data, 8 + 8 * j)) }
                } else {
                    return nil
                }
            }
        }
        return (pages, .complete)
    }
}
