public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds executables built beside the test bundle (the `strata` CLI, test helpers), so
/// tests run the real binaries.
public enum BuildProducts {
    /// The build products directory: the folder holding the running test binary.
    public static var directory: URL {
        #if os(Linux)
        let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
        let me = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        #endif
        var dir = me.deletingLastPathComponent()
        // On Darwin the test binary sits inside Foo.xctest/Contents/MacOS.
        while dir.path.contains(".xctest") { dir = dir.deletingLastPathComponent() }
        return dir
    }

    /// The URL of the executable product `name`.
    public static func executable(_ name: String) -> URL {
        directory.appendingPathComponent(name)
    }
}

/// The result of running a process to completion.
public struct ProcessResult: Sendable {
    /// The exit status.
    public let status: Int32
    /// Everything written to standard output, as UTF-8.
    public let standardOutput: String
    /// Everything written to standard error, as UTF-8.
    public let standardError: String
}

/// Runs `executable` with `arguments`, feeding `input` on standard input, and waits.
public func runProcess(
    _ executable: URL, _ arguments: [String], input: String? = nil, environment: [String: String]? = nil,
    currentDirectory: URL? = nil
) throws -> ProcessResult {
    let process = ChildProcess()
    process.executableURL = executable
    process.arguments = arguments
    if let environment {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    }
    if let currentDirectory { process.currentDirectoryURL = currentDirectory }
    let out = Pipe()
    let err = Pipe()
    let inPipe = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = inPipe
    try process.run()
    if let input { writeIgnoringBrokenPipe(Data(input.utf8), to: inPipe.fileHandleForWriting) }
    try inPipe.fileHandleForWriting.close()
    // Read both pipes fully before waiting, so a chatty child can't block on a full pipe.
    let group = DispatchGroup()
    nonisolated(unsafe) var errData = Data()
    group.enter()
    DispatchQueue.global().async {
        errData = err.fileHandleForReading.readDataToEndOfFile()
        group.leave()
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return ProcessResult(
        status: process.terminationStatus, standardOutput: String(decoding: outData, as: UTF8.self),
        standardError: String(decoding: errData, as: UTF8.self))
}

/// ``runProcess(_:_:input:environment:currentDirectory:)`` for async tests: the child is run
/// and waited for on a thread of its own, so the calling task gives its thread of Swift's
/// cooperative pool back while the child runs. (The pool has a thread per core: on a 2-core
/// machine two tests blocking in the synchronous form would hold all of it, and no other test
/// task could run until a child ended.)
public func runProcessAsync(
    _ executable: URL, _ arguments: [String], input: String? = nil, environment: [String: String]? = nil,
    currentDirectory: URL? = nil
) async throws -> ProcessResult {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ProcessResult, any Error>) in
        Thread.detachNewThread {
            continuation.resume(
                with: Result {
                    try runProcess(executable, arguments, input: input, environment: environment, currentDirectory: currentDirectory)
                })
        }
    }
}

/// Whether `tool` is on the PATH.
public func toolIsInstalled(_ tool: String) -> Bool {
    let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
    return paths.contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)") }
}

/// Writes `data` to a child's standard input, giving up quietly when the child has gone.
///
/// A child that exits before reading its input (a command refusing its arguments) leaves
/// the pipe without a reader: the write then raises SIGPIPE, which would kill the whole test
/// process, and `FileHandle.write(_:)` traps on the EPIPE. So SIGPIPE is blocked on this
/// thread around a plain `write(2)` loop, and one the write raised is taken off the thread's
/// pending signals before the mask is restored.
public func writeIgnoringBrokenPipe(_ data: Data, to handle: FileHandle) {
    var pipeSignal = sigset_t()
    sigemptyset(&pipeSignal)
    sigaddset(&pipeSignal, SIGPIPE)
    var previous = sigset_t()
    pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
    defer {
        var pending = sigset_t()
        sigpending(&pending)
        if sigismember(&pending, SIGPIPE) == 1 {
            #if os(Linux)
            var now = timespec(tv_sec: 0, tv_nsec: 0)
            _ = sigtimedwait(&pipeSignal, nil, &now)
            #else
            var taken: Int32 = 0
            _ = sigwait(&pipeSignal, &taken)
            #endif
        }
        pthread_sigmask(SIG_SETMASK, &previous, nil)
    }
    data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
        guard var base = raw.baseAddress else { return }
        var left = raw.count
        while left > 0 {
            let written = write(handle.fileDescriptor, base, left)
            if written < 0 {
                if errno == EINTR { continue }
                return  // EPIPE: the child has gone; what it didn't read doesn't matter
            }
            left -= written
            base += written
        }
    }
}
