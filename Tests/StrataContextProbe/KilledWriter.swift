import Foundation
#if canImport(Glibc)
import Glibc
#endif

// The `die` mode's crash point (Review.swift): this process dies by SIGKILL right after
// LMDB's write of a commit's meta page returns, before LMDB publishes the transaction to
// readers (`mdb_env_write_meta` writes the meta page with `pwrite`, then sets the lock file's
// transaction ID) — where a writer killed during the meta page's synchronous write stops.
//
// liblmdb's `pwrite` slot in its global offset table is pointed at `killingPwrite` below, in
// this process only (the probe's code is linked into the test binary too, where nothing calls
// this): it passes every write on to the C library's `pwrite`, and kills the process after a
// write into the two meta pages (the data file's first two pages, a part of one page long).

private typealias WriteAt = @convention(c) (Int32, UnsafeRawPointer?, Int, Int) -> Int

/// The C library's `pwrite`, as liblmdb's slot held it (set before the slot is changed).
nonisolated(unsafe) private var libraryPwrite: WriteAt?
nonisolated(unsafe) private var pageSize = 4096
/// The signal the next meta page write raises: SIGKILL (`die`), or SIGSTOP once (`stall`:
/// the writer stops holding LMDB's writer lock, its commit written and not yet published).
nonisolated(unsafe) private var metaWriteSignal: Int32 = SIGKILL

private let killingPwrite: WriteAt = { descriptor, buffer, count, offset in
    guard let libraryPwrite else {
        errno = ENOSYS
        return -1
    }
    let written = libraryPwrite(descriptor, buffer, count, offset)
    if written == count, offset < 2 * pageSize, count < pageSize, metaWriteSignal != 0 {
        let signal = metaWriteSignal
        if signal == SIGSTOP { metaWriteSignal = 0 }
        kill(getpid(), signal)
    }
    return written
}

/// Makes this process stop (SIGSTOP) right after LMDB's next meta page write, before LMDB
/// publishes the commit, holding LMDB's writer lock until it is continued (SIGCONT); then the
/// commit goes on as any. Throws as ``killAfterNextMetaWrite()`` does.
func stopAfterNextMetaWrite() throws {
    metaWriteSignal = SIGSTOP
    try killAfterNextMetaWrite()
}

/// Makes the next meta page write of LMDB this process's last act; throws if liblmdb's
/// `pwrite` slot wasn't found (the library isn't mapped, or doesn't call `pwrite` through it).
func killAfterNextMetaWrite() throws {
    pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    // liblmdb's load address: its first mapping (file offset 0) in /proc/self/maps.
    // (Read to the end: the file reports no size.)
    guard let data = FileHandle(forReadingAtPath: "/proc/self/maps")?.readDataToEndOfFile(),
        case let maps = String(decoding: data, as: UTF8.self),
        let line = maps.split(separator: "\n").first(where: { $0.contains("liblmdb") && $0.split(separator: " ")[2] == "00000000" }),
        let start = line.split(separator: "-").first, let base = UInt(start, radix: 16),
        let image = UnsafeRawPointer(bitPattern: base)
    else { throw CrashPointNotSet(reason: "liblmdb isn't in /proc/self/maps") }
    let header = image.loadUnaligned(as: Elf64_Ehdr.self)
    var dynamic: UnsafeRawPointer?
    for k in 0..<Int(header.e_phnum) {
        let segment = image.loadUnaligned(fromByteOffset: Int(header.e_phoff) + k * Int(header.e_phentsize), as: Elf64_Phdr.self)
        if segment.p_type == UInt32(PT_DYNAMIC) { dynamic = image + Int(segment.p_vaddr) }
    }
    guard let dynamic else { throw CrashPointNotSet(reason: "liblmdb has no dynamic section") }
    // The dynamic linker has made these addresses absolute already, or they are offsets.
    func address(_ value: UInt64) -> UnsafeRawPointer? {
        UnsafeRawPointer(bitPattern: value >= UInt64(base) ? UInt(value) : base + UInt(value))
    }
    var relocations: UnsafeRawPointer?, relocationBytes = 0, symbols: UnsafeRawPointer?, names: UnsafeRawPointer?
    var position = 0
    while true {
        let entry = dynamic.loadUnaligned(fromByteOffset: position, as: Elf64_Dyn.self)
        position += MemoryLayout<Elf64_Dyn>.size
        switch entry.d_tag {
        case Int64(DT_NULL): break
        case Int64(DT_JMPREL): relocations = address(entry.d_un.d_ptr); continue
        case Int64(DT_PLTRELSZ): relocationBytes = Int(entry.d_un.d_val); continue
        case Int64(DT_SYMTAB): symbols = address(entry.d_un.d_ptr); continue
        case Int64(DT_STRTAB): names = address(entry.d_un.d_ptr); continue
        default: continue
        }
        break
    }
    guard let relocations, let symbols, let names else { throw CrashPointNotSet(reason: "liblmdb's dynamic section lacks its PLT relocations") }
    for k in 0..<relocationBytes / MemoryLayout<Elf64_Rela>.size {
        let relocation = relocations.loadUnaligned(fromByteOffset: k * MemoryLayout<Elf64_Rela>.size, as: Elf64_Rela.self)
        let symbol = symbols.loadUnaligned(fromByteOffset: Int(relocation.r_info >> 32) * MemoryLayout<Elf64_Sym>.size, as: Elf64_Sym.self)
        guard String(cString: (names + Int(symbol.st_name)).assumingMemoryBound(to: CChar.self)) == "pwrite",
            let slot = UnsafeMutableRawPointer(bitPattern: base + UInt(relocation.r_offset))
        else { continue }
        // The slot is in the read-only-after-relocation part: make its page writable first.
        let page = UnsafeMutableRawPointer(bitPattern: Int(bitPattern: slot) & ~(pageSize - 1))
        guard mprotect(page, pageSize, PROT_READ | PROT_WRITE) == 0 else { throw CrashPointNotSet(reason: "mprotect: errno \(errno)") }
        libraryPwrite = slot.load(as: WriteAt.self)
        slot.storeBytes(of: killingPwrite, as: WriteAt.self)
        return
    }
    throw CrashPointNotSet(reason: "liblmdb doesn't call pwrite through its PLT")
}

struct CrashPointNotSet: Error, CustomStringConvertible {
    let reason: String
    var description: String { "the crash point can't be set: \(reason)" }
}
