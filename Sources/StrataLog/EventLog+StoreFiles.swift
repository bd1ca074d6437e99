public import Foundation
import StrataModel
import StrataStorage

extension MetaKey {
    /// The user's store metadata (``MetadataValue/encode(_:)``); absent: none.
    static let userMetadata = Array("userMetadata".utf8)
}

// MARK: - User metadata

extension LogReader {
    /// The user's store metadata (spec 0004 §10, `meta userMetadata`); empty when none was set.
    ///
    /// - Throws: ``LogError/malformed(_:)`` naming the key whose stored value is damaged.
    public func userMetadata() throws -> [String: MetadataValue] {
        guard let bytes = try txn.value(forKey: MetaKey.userMetadata, in: tables.meta) else { return [:] }
        return try MetadataValue.decode(Data(bytes))
    }
}

extension EventLog {
    /// The user's store metadata; empty when none was set.
    ///
    /// - Throws: ``LogError/malformed(_:)`` naming the key whose stored value is damaged.
    public func userMetadata() throws -> [String: MetadataValue] {
        try read { reader in try reader.userMetadata() }
    }

    /// Replaces the user's store metadata with `metadata`, at once, in its own write
    /// transaction (an empty dictionary removes the row). It is no part of the log: no event
    /// is written and the head doesn't move.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` for a store open read-only; ``LMDBError``
    ///   for I/O failures.
    public func setUserMetadata(_ metadata: [String: MetadataValue]) throws {
        if configuration.isReadOnly { throw LogError.invalidOperation("the store at \(path) is open read-only: its metadata can't be set") }
        let bytes = metadata.isEmpty ? nil : Array(try MetadataValue.encode(metadata))
        try environment.write { txn in
            if let bytes {
                try txn.put(bytes, forKey: MetaKey.userMetadata, in: tables.meta)
            } else {
                _ = try txn.delete(key: MetaKey.userMetadata, in: tables.meta)
            }
        }
    }
}

// MARK: - A dead writer's commit a read-only open can't see

extension EventLog {
    /// For a store open read-only where LMDB opened the environment `MDB_RDONLY` (no other
    /// open of this process writes to it): the LMDB transaction its reads see and the newest
    /// one on disk, when a writer of another process died after writing its commit and before
    /// publishing it to readers (spec 0001 §2.4). Reads through this log show the store as
    /// of the commit before until another process writes to it; any writable open publishes
    /// it. Nil when the reads see the newest commit, and for a writable store.
    public func unpublishedCommit() throws -> (visible: Int, newest: Int)? {
        try environment.unpublishedCommit()
    }
}

// MARK: - The store's files

extension EventLog {
    /// The entries of the store directory `path` that Strata doesn't create there (spec 0004
    /// §1): anything but `data.mdb`, `lock.mdb`, `segments/` and vacuum scratch directories
    /// (`.vacuum-…`), and in `segments/` anything but segment and dictionary files
    /// (`*.zst`, `*.dict`) and the temporary and set-aside files compaction and purge make
    /// (`.tmp-…`, `.purged-…`, `.dat.nosync…`). Paths are relative to `path`, sorted.
    public static func foreignEntries(inStoreDirectory path: String) throws -> [String] {
        let fileManager = FileManager.default
        var foreign: [String] = []
        for name in try fileManager.contentsOfDirectory(atPath: path) {
            let full = (path as NSString).appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            _ = fileManager.fileExists(atPath: full, isDirectory: &isDirectory)
            switch name {
            case "data.mdb", "lock.mdb":
                if isDirectory.boolValue { foreign.append(name) }
            case "segments":
                guard isDirectory.boolValue else {
                    foreign.append(name)
                    continue
                }
                for entry in try fileManager.contentsOfDirectory(atPath: full) {
                    let known = entry.hasSuffix(".zst") || entry.hasSuffix(".dict") || entry.hasPrefix(".tmp-")
                        || entry.hasPrefix(SegmentReader.setAsidePrefix) || entry.hasPrefix(".dat.nosync")
                    var entryIsDirectory: ObjCBool = false
                    _ = fileManager.fileExists(atPath: (full as NSString).appendingPathComponent(entry), isDirectory: &entryIsDirectory)
                    if !known || entryIsDirectory.boolValue { foreign.append("segments/\(entry)") }
                }
            default:
                if !(name.hasPrefix(".vacuum-") && isDirectory.boolValue) { foreign.append(name) }
            }
        }
        return foreign.sorted()
    }

    /// Reads the store identity (`storeUUID`, `formatVersion`) of the environment in `path`:
    /// whether the directory holds a Strata store. Opens it read-only for the moment.
    ///
    /// - Throws: ``LogError/notAStore(_:)`` saying why it isn't one.
    public static func storeIdentity(at path: String) throws -> UUID {
        guard FileManager.default.fileExists(atPath: (path as NSString).appendingPathComponent("data.mdb")) else {
            throw LogError.notAStore("\(path) (no data.mdb)")
        }
        var options = LMDBEnvironment.Options()
        options.isReadOnly = true
        options.maxDatabases = StoreTables.names.count + 4
        let bytes: [UInt8]?
        let format: [UInt8]?
        do {
            let environment = try LMDBEnvironment(path: path, databases: [DatabaseDescriptor("meta")], options: options)
            let meta = try environment.database(named: "meta")
            (bytes, format) = try environment.read { txn in
                (try txn.value(forKey: MetaKey.storeUUID, in: meta), try txn.value(forKey: MetaKey.formatVersion, in: meta))
            }
        } catch let error as LMDBError where error.code == .databaseNotFound || error.code == .invalid || error.code == .versionMismatch {
            throw LogError.notAStore("\(path) (\(error.message))")
        }
        guard let bytes, bytes.count == 16, format?.count == 4 else {
            throw LogError.notAStore("\(path) (its environment has no store UUID and format version)")
        }
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// Deletes the store in the directory `path` — the LMDB environment, its lock file, the
    /// segment and dictionary files, scratch left by an interrupted vacuum — and the
    /// directory. Returns false, doing nothing, when there is no directory at `path` or it is
    /// empty.
    ///
    /// It refuses, deleting nothing, a path that isn't a Strata store (a file, a directory
    /// holding anything Strata doesn't create there, an environment without a store UUID),
    /// and a store open anywhere — in this process or another
    /// (``LMDBEnvironment/withExclusiveAccess(path:operation:_:)``). `data.mdb` goes last, so
    /// an interrupted destroy leaves a directory that is still recognised as a store.
    ///
    /// - Throws: ``LogError/notAStore(_:)`` naming what isn't Strata's; ``LMDBError`` with
    ///   ``LMDBError/Code/incompatibleOpen`` naming who has the store open.
    @discardableResult
    public static func destroyStore(at path: String) throws -> Bool {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: path, isDirectory: &isDirectory) else { return false }
        guard isDirectory.boolValue else { throw LogError.notAStore("\(path) is a file, not a store directory; nothing was removed") }
        let foreign = try foreignEntries(inStoreDirectory: path)
        guard foreign.isEmpty else {
            throw LogError.notAStore(
                "\(path) holds \(foreign.prefix(5).joined(separator: ", "))\(foreign.count > 5 ? " and \(foreign.count - 5) more" : ""), which Strata doesn't create in a store; nothing was removed")
        }
        if try fileManager.contentsOfDirectory(atPath: path).isEmpty { return false }
        _ = try storeIdentity(at: path)
        try LMDBEnvironment.withExclusiveAccess(path: path, operation: "destroy a store") {
            for name in try fileManager.contentsOfDirectory(atPath: path) where name != "data.mdb" {
                try fileManager.removeItem(atPath: (path as NSString).appendingPathComponent(name))
            }
            try fileManager.removeItem(atPath: (path as NSString).appendingPathComponent("data.mdb"))
            try fileManager.removeItem(atPath: path)
            syncDirectory((path as NSString).deletingLastPathComponent)
        }
        return true
    }

    /// Copies the store into the directory `destination`, which must not exist: a consistent
    /// copy of the environment (`mdb_env_copy2`, the snapshot of one read transaction) and
    /// of the segment and dictionary files its manifest names, every file fsynced. The copy
    /// has the same store UUID (its object URIs stay valid) and no lock file; the store may
    /// be written meanwhile, by this process or another.
    ///
    /// A read transaction is held while copying, so a purge meanwhile only sets the files it
    /// drops aside (spec 0004 §7.6) and they are copied from there.
    ///
    /// - Throws: ``LogError/invalidOperation(_:)`` if `destination` exists;
    ///   ``LogError/segment(_:)`` for a segment file missing from the store; ``LMDBError``
    ///   and file errors naming the path.
    public func copyStore(to destination: String) throws {
        let fileManager = FileManager.default
        guard !fileManager.fileExists(atPath: destination) else {
            throw LogError.invalidOperation("\(destination) exists; a store is copied into a new directory")
        }
        try fileManager.createDirectory(atPath: destination, withIntermediateDirectories: false)
        try read { reader in
            // mdb_env_copy2 reads in its own transaction, no older than this one.
            let snapshot = reader.txn.id
            try environment.copy(to: destination, compacting: false)
            let files = try Self.segmentFiles(ofStoreAt: destination)
            if !files.isEmpty {
                let segments = (destination as NSString).appendingPathComponent("segments")
                try fileManager.createDirectory(atPath: segments, withIntermediateDirectories: false)
                for name in files {
                    // Under its own name, or set aside by a purge after the copy's snapshot
                    // (`.purged-T-NAME`), even one that renames it while it is being found.
                    let source = (segmentDirectory as NSString).appendingPathComponent(name)
                    guard let file = try SegmentReader.openFile(name, in: segmentDirectory, snapshot: snapshot, context: "the segment file \(name)")
                    else {
                        throw LogError.segment("the segment file \(source) the store's manifest names is missing; nothing was copied")
                    }
                    let target = (segments as NSString).appendingPathComponent(name)
                    try file.copy(to: target)
                    try syncFile(target)
                }
                syncDirectory(segments)
            }
            try syncFile((destination as NSString).appendingPathComponent("data.mdb"))
            // Reading the manifest made a lock file; a fresh copy has none.
            try? fileManager.removeItem(atPath: (destination as NSString).appendingPathComponent("lock.mdb"))
            syncDirectory(destination)
        }
    }

    /// The segment and dictionary file names the manifest of the store at `path` names.
    private static func segmentFiles(ofStoreAt path: String) throws -> [String] {
        let copy = try EventLog(openingExistingAt: path, readOnly: true)
        return try copy.segments().flatMap { [$0.fileName] + ($0.dictionaryFileName.map { [$0] } ?? []) }
    }

    /// The highest of `path` and its ancestors that doesn't exist — what creating `path`
    /// with its parents makes, and removing undoes —, or nil when `path` exists.
    package static func firstMissingAncestor(of path: String) -> String? {
        var missing: String?
        var current = URL(fileURLWithPath: path).standardizedFileURL.path
        while current != "/", !FileManager.default.fileExists(atPath: current) {
            missing = current
            current = (current as NSString).deletingLastPathComponent
        }
        return missing
    }

    /// Removes `directory` and its ancestors up to `top` (itself, or an ancestor of it),
    /// deepest first, as long as each is empty: the directories made for a destination
    /// (``firstMissingAncestor(of:)``) when what was to go there failed. One that isn't empty
    /// stays, with those above it: something else was put there meanwhile (another store
    /// moved or copied beside it), which a removal of the whole tree would delete.
    package static func removeEmptyDirectories(from directory: String, through top: String) {
        let top = URL(fileURLWithPath: top).standardizedFileURL.path
        var current = URL(fileURLWithPath: directory).standardizedFileURL.path
        while current == top || current.hasPrefix(top.hasSuffix("/") ? top : top + "/") {
            guard rmdir(current) == 0, current != top else { return }
            current = (current as NSString).deletingLastPathComponent
        }
    }

    /// Runs `body` while no write of this process to the store runs (through this log or
    /// another open on it): writes started meanwhile wait until it returns. `body` may read
    /// and copy the store (``copyStore(to:)``), not write to it.
    package func holdingWrites<R>(_ body: () throws -> R) throws -> R {
        try environment.holdingWrites(body)
    }

    /// Makes every later write through this log throw ``LogError/storeMoved(from:to:)``:
    /// the store was moved to `destination`, and a write to its old place would be lost.
    /// Other logs open on the old place write on.
    package func refuseWrites(movedTo destination: String) {
        environment.refuseWrites(throwing: LogError.storeMoved(from: path, to: destination))
    }

    /// Whether `path` is inside `directory` (or, with `orItself`, is `directory`), symbolic
    /// links followed in the nearest existing ancestor of each (`path` needn't exist yet).
    package static func isPath(_ path: String, inside directory: String, orItself: Bool = false) -> Bool {
        func resolved(_ path: String) -> String {
            // The nearest existing ancestor's symbolic links resolved, the rest appended.
            var url = URL(fileURLWithPath: path).standardizedFileURL
            var rest: [String] = []
            while !FileManager.default.fileExists(atPath: url.path), url.pathComponents.count > 1 {
                rest.insert(url.lastPathComponent, at: 0)
                url.deleteLastPathComponent()
            }
            return rest.reduce(url.resolvingSymlinksInPath()) { $0.appendingPathComponent($1) }.path
        }
        let inner = resolved(path)
        let outer = resolved(directory)
        return (orItself && inner == outer) || inner.hasPrefix(outer.hasSuffix("/") ? outer : outer + "/")
    }

    /// Throws ``LogError/invalidOperation(_:)`` when `destination` is inside the store
    /// directory at `source` (symbolic links followed): a store copied there would be an entry
    /// Strata doesn't create in the source's directory, which then couldn't be destroyed or
    /// replaced (and deleting it by hand would delete the copy).
    package static func refuseDestination(_ destination: String, insideStoreAt source: String) throws {
        guard isPath(destination, inside: source) else { return }
        throw LogError.invalidOperation(
            "\(destination) is inside the store at \(source): a store there would be in the other's directory (which then couldn't be destroyed or replaced, and deleting it would delete both); nothing was changed")
    }

    /// Puts a copy of `source` (``copyStore(to:)``) at `destination`, replacing the store
    /// there if there is one: the copy is made in a directory beside it
    /// (`.NAME.copy-UUID`), fsynced, then renamed into place — the old store is first
    /// renamed aside (`.NAME.replaced-UUID`) and deleted after. A crash before the renames
    /// leaves the old store as it was; between them, the old store is at the aside name and
    /// the copy at the copy name, whole (nothing at `destination`).
    ///
    /// It refuses, changing nothing, a `destination` that is a file or a directory that
    /// isn't a Strata store (``destroyStore(at:)``'s rules), a store open anywhere, or a path
    /// inside `source`'s directory.
    ///
    /// - Throws: ``LogError/notAStore(_:)``, ``LogError/invalidOperation(_:)``, ``LMDBError``
    ///   with ``LMDBError/Code/incompatibleOpen`` naming who has `destination` open, and
    ///   what the copy throws.
    public static func replaceStore(at destination: String, withCopyOf source: EventLog) throws {
        let fileManager = FileManager.default
        // Absolute: a relative path's parent would be "" (the current directory unnamed).
        let standardized = URL(fileURLWithPath: destination).standardizedFileURL.path
        guard standardized != URL(fileURLWithPath: source.path).standardizedFileURL.path else {
            throw LogError.invalidOperation("\(destination) is the source store itself; nothing was replaced")
        }
        try refuseDestination(destination, insideStoreAt: source.path)
        var isDirectory: ObjCBool = false
        let exists = fileManager.fileExists(atPath: standardized, isDirectory: &isDirectory)
        if exists {
            guard isDirectory.boolValue else { throw LogError.notAStore("\(destination) is a file, not a store directory; nothing was replaced") }
            let foreign = try foreignEntries(inStoreDirectory: standardized)
            guard foreign.isEmpty else {
                throw LogError.notAStore("\(destination) holds \(foreign.prefix(5).joined(separator: ", ")), which Strata doesn't create in a store; nothing was replaced")
            }
            if !(try fileManager.contentsOfDirectory(atPath: standardized).isEmpty) { _ = try storeIdentity(at: standardized) }
            if let holder = LMDBEnvironment.openedBy(path: standardized) {
                throw LMDBError.storeOpen(standardized, by: holder, operation: "replace a store")
            }
        }
        let parent = (standardized as NSString).deletingLastPathComponent
        let name = (standardized as NSString).lastPathComponent
        // Directories made for the destination go again if the copy fails.
        let createdParent = firstMissingAncestor(of: parent)
        try fileManager.createDirectory(atPath: parent, withIntermediateDirectories: true)
        var placed = false
        defer { if !placed, let createdParent { removeEmptyDirectories(from: parent, through: createdParent) } }
        let staging = (parent as NSString).appendingPathComponent(".\(name).copy-\(UUID().uuidString)")
        defer { try? fileManager.removeItem(atPath: staging) }
        try source.copyStore(to: staging)
        syncDirectory(parent)

        func move(_ from: String, _ to: String) throws {
            guard rename(from, to) == 0 else {
                let code = errno
                throw LogError.invalidOperation("cannot rename \(from) to \(to): \(String(cString: strerror(code))); nothing was replaced")
            }
        }
        guard exists else {
            try move(staging, standardized)
            placed = true
            syncDirectory(parent)
            return
        }
        placed = true  // the parent existed: it held the store replaced
        let aside = (parent as NSString).appendingPathComponent(".\(name).replaced-\(UUID().uuidString)")
        try LMDBEnvironment.withExclusiveAccess(path: standardized, operation: "replace a store") {
            try move(standardized, aside)
            do {
                try move(staging, standardized)
            } catch {
                try? move(aside, standardized)
                throw error
            }
            syncDirectory(parent)
        }
        try? fileManager.removeItem(atPath: aside)
    }
}

/// fsyncs the file at `path`.
func syncFile(_ path: String) throws {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else {
        let code = errno
        throw LogError.invalidOperation("cannot open \(path) to sync it: \(String(cString: strerror(code)))")
    }
    defer { close(fd) }
    guard fsync(fd) == 0 else {
        let code = errno
        throw LogError.invalidOperation("cannot sync \(path): \(String(cString: strerror(code)))")
    }
}
