import Foundation

/// Unbuffered writes to the standard streams.
enum FileHandleOutput {
    /// Writes `text` to standard error; a write that fails (nobody reads it) is dropped.
    static func standardError(_ text: String) {
        try? FileHandle.standardError.write(contentsOf: Data(text.utf8))
    }
}
