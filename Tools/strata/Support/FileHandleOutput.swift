import Foundation

/// Unbuffered writes to the standard streams.
enum FileHandleOutput {
    /// Writes `text` to standard error; a write that fails (nobody reads it) is dropped.
    static func standardError(_ text: String) {
        try? FileHandle.standardError.write(contentsOf: Data(text.utf8))
    }
}

/// Writes `text` and a newline to standard output at once, for the commands that print a
/// few lines as they go (`compact`, `doctor`, `demo`).
///
/// A write that fails — a full disk, the reader of a pipe gone while SIGPIPE is ignored —
/// prints `strata: can't write to standard output: REASON` and throws exit status 1, as
/// ``OutputSink`` does for the other commands (before, these commands printed with `print`,
/// whose failures are dropped: the output was lost and the exit status was 0). Thrown rather
/// than exiting, so a command's cleanup (doctor's scratch directory) still runs.
func writeLine(_ text: String = "") throws {
    do {
        try FileHandle.standardOutput.write(contentsOf: Data((text + "\n").utf8))
    } catch {
        printError("strata: can't write to standard output: \(OutputSink.reason(error))")
        throw ExitStatus.failure
    }
}
