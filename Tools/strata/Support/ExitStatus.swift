import ArgumentParser

/// The exit statuses every `strata` command uses (see `Specs/0007-cli.md`).
enum ExitStatus {
    /// A problem was found, or an operation failed.
    static let failure = ExitCode(1)
    /// Bad usage (swift-argument-parser's validation failure is the same number).
    static let usage = ExitCode(64)
}

/// Writes `message` to standard error, followed by a newline.
func printError(_ message: String) {
    var standardError = StandardError()
    print(message, to: &standardError)
}

/// Standard error as a `TextOutputStream`.
struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        FileHandleOutput.standardError(string)
    }
}
