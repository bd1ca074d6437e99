import Foundation

/// Buffered output to standard output or a file: large exports and logs are written in
/// 64 KiB blocks, never held whole.
final class OutputSink {
    private let handle: FileHandle
    private let ownsHandle: Bool
    private var buffer: [UInt8] = []

    /// Standard output.
    init() {
        handle = FileHandle.standardOutput
        ownsHandle = false
        buffer.reserveCapacity(1 << 16)
    }

    /// A new file at `path` (replacing one that exists).
    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw CommandFailure("cannot create \(path)")
        }
        handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        ownsHandle = true
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
    func flush() {
        guard !buffer.isEmpty else { return }
        handle.write(Data(buffer))
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes, and closes a file.
    func close() {
        flush()
        if ownsHandle { try? handle.close() }
    }
}
