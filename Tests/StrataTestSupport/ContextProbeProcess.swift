import Foundation

/// A running `StrataContextProbe` (a second process on the same store), read line by line.
public final class ContextProbeProcess {
    public let process = ChildProcess()
    private let output = Pipe()
    private let input = Pipe()
    private let errors = Pipe()
    private var buffer = Data()

    public init(_ arguments: [String]) throws {
        process.executableURL = BuildProducts.executable("StrataContextProbe")
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = input
        try process.run()
    }

    /// The next line, or nil once the probe has exited and everything was read.
    public func nextLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    public func send(_ line: String) {
        writeIgnoringBrokenPipe(Data((line + "\n").utf8), to: input.fileHandleForWriting)
    }

    /// Closes standard input and waits for the exit; returns the exit status and standard error.
    public func finish() throws -> (Int32, String) {
        try input.fileHandleForWriting.close()
        while nextLine() != nil {}
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    /// Waits (up to `polls` × 10 ms) for the probe to stop itself, as its `stall` mode does
    /// after it writes its commit's meta page; whether it did.
    public func waitUntilStopped(polls: Int = 3_000) -> Bool {
        let pid = process.processIdentifier
        var left = polls
        while !processIsStopped(pid) && left > 0 {
            usleep(10_000)
            left -= 1
        }
        return processIsStopped(pid)
    }

    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}

/// Whether the process `pid` is stopped (`T` in /proc/PID/stat; false where there is no /proc).
public func processIsStopped(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return false }
    return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
}
