import ArgumentParser
import Foundation
import Strata

/// Buffered output to standard output or a file: large exports and logs are written in
/// 64 KiB blocks, never held whole.
final class OutputSink {
    private let handle: FileHandle
    private let ownsHandle: Bool
    /// What the output is, for an error: `standard output` or the file's path.
    private let name: String
    /// The device and inode of the regular file the output goes to (nil: standard output, a
    /// pipe, a device), so a write that fails can take back what it left there.
    private let regularFile: (device: UInt64, inode: UInt64)?
    private var buffer: [UInt8] = []
    /// Files finished earlier as part of the same output (a csv export's entity files),
    /// which a failed write takes back with this one.
    var finishedBefore: FinishedFiles?

    /// Standard output.
    init() {
        handle = FileHandle.standardOutput
        ownsHandle = false
        name = "standard output"
        regularFile = nil
        buffer.reserveCapacity(1 << 16)
    }

    /// The file at `path`, created or emptied, written through what the path names: a
    /// symlink's file, a pipe (`/dev/fd/N`, a FIFO), a device — as a shell's `>` writes. (A
    /// new file put in the path's place would replace a symlink and can't be made for a
    /// pipe.)
    init(path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard descriptor >= 0 else {
            throw CommandFailure("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        ownsHandle = true
        name = path
        var status = stat()
        if fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG {
            regularFile = (UInt64(status.st_dev), UInt64(status.st_ino))
        } else {
            regularFile = nil
        }
        buffer.reserveCapacity(1 << 16)
    }

    /// Appends `text`.
    func write(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { flush() }
    }

    /// Appends `text` and a newline.
    func line(_ text: String = "") {
        write(text)
        write("\n")
    }

    /// Writes out what is buffered.
    ///
    /// A write that fails — the reader of a pipe gone while SIGPIPE is ignored, a full disk —
    /// ends the command with exit status 1 and `strata: can't write to NAME: REASON`: nothing
    /// more can be delivered, and the output so far is incomplete. A regular file is taken
    /// back — removed, or emptied when the path reaches it through a symbolic link — and the
    /// message says so: the lines written so far would read as a whole export of fewer
    /// objects (ndjson, csv), and on a full disk they keep it full.
    func flush() {
        guard !buffer.isEmpty else { return }
        do {
            try handle.write(contentsOf: buffer)
        } catch {
            printError("strata: can't write to \(name): \(Self.reason(error))\(takeBackPartialFile())\(finishedBefore?.takeBack() ?? "")")
            exit(ExitStatus.failure.rawValue)
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Removes the regular file the output went to (when `name` still names it), else
    /// empties it; the words to add to the error.
    private func takeBackPartialFile() -> String {
        guard let regularFile else { return "" }
        var status = stat()
        if lstat(name, &status) == 0, UInt64(status.st_dev) == regularFile.device, UInt64(status.st_ino) == regularFile.inode,
            unlink(name) == 0
        {
            return " (the incomplete file was removed)"
        }
        if ftruncate(handle.fileDescriptor, 0) == 0 { return " (the incomplete file was emptied)" }
        return " (the file is incomplete)"
    }

    /// The error to end the command with when `error` stops it before the output is
    /// complete (a postgres export meeting a NUL, a csv entity file that can't be created,
    /// a store that can't be read): a regular file is taken back as a failed write takes
    /// it back (before, the lines so far stayed, which read as a whole export of fewer objects
    /// — or, for sql, a script without `COMMIT;`), and the message says so.
    func abandon(_ error: any Error) -> any Error {
        buffer.removeAll()
        let note = takeBackPartialFile().replacingOccurrences(of: "the incomplete file", with: "the incomplete file \(name)")
        let finished = finishedBefore?.takeBack() ?? ""
        guard !note.isEmpty || !finished.isEmpty, !(error is ExitCode) else { return error }
        return CommandFailure("\(error)\(note)\(finished)")
    }

    /// The device and inode of the regular file written, if that is what it is.
    var fileIdentity: (device: UInt64, inode: UInt64)? { regularFile }

    /// Ends a JSON document that an error stopped after it began (`closing`: what closes the
    /// arrays and objects left open, then `,` and the error member): the document stays
    /// well-formed — its last member `"error":"MESSAGE"`, MESSAGE what standard error says
    /// after `strata: ` — so a program reading it (`jq`) gets what was read before the error
    /// and can tell the document is incomplete, where an unfinished document gave it nothing
    /// but a parse error. The command still exits 1 with the error on standard error.
    func endDocument(_ closing: String, error message: String) {
        line(closing + "\"error\":" + ValueRendering.jsonString(message) + "}")
    }

    /// Flushes, and closes a file.
    func close() {
        flush()
        if ownsHandle { try? handle.close() }
    }

    /// The system's words for a failed write (`Broken pipe`, `No space left on device`).
    static func reason(_ error: any Error) -> String {
        // The underlying error may be stored as a Swift error (Foundation on Linux): bridge it.
        let underlying = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? any Error).map { $0 as NSError }
        if let posix = underlying ?? (error as NSError?), posix.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(posix.code)))
        }
        return "\(error)"
    }
}

/// Files written as parts of one output — a csv export's entity files — which a failure in
/// a later part takes back: the files left would read as a whole export of fewer entities
/// (before, they stayed). A directory the output made goes too when that leaves it empty.
final class FinishedFiles {
    private var files: [(path: String, device: UInt64, inode: UInt64)] = []
    private let directory: String
    /// The highest directory made for the output (nil: it existed).
    private let madeDirectory: String?

    init(directory: String, madeDirectory: String?) {
        self.directory = directory
        self.madeDirectory = madeDirectory
    }

    /// Records `sink`'s file as finished.
    func add(_ path: String, _ sink: OutputSink) {
        if let identity = sink.fileIdentity { files.append((path, identity.device, identity.inode)) }
    }

    /// Removes the files (those the paths still name) and the directories made for them
    /// that are left empty; the words to add to the error.
    func takeBack() -> String {
        let removed = files.filter { file in
            var status = stat()
            return lstat(file.path, &status) == 0 && UInt64(status.st_dev) == file.device && UInt64(status.st_ino) == file.inode
                && unlink(file.path) == 0
        }
        files = []
        if let madeDirectory { EventLog.removeEmptyDirectories(from: directory, through: madeDirectory) }
        guard !removed.isEmpty else { return "" }
        let names = removed.map { ($0.path as NSString).lastPathComponent }
        let list = names.count == 1 ? names[0] : names.dropLast().joined(separator: ", ") + " and " + (names.last ?? "")
        let gone = madeDirectory.map { FileManager.default.fileExists(atPath: $0) ? "" : ", with the directory the export made" } ?? ""
        return "; the entity file\(names.count == 1 ? "" : "s") written before it, \(list), \(names.count == 1 ? "was" : "were") removed\(gone)"
    }
}
