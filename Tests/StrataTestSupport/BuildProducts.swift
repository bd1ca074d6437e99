public import Foundation

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
    let process = Process()
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
    if let input { inPipe.fileHandleForWriting.write(Data(input.utf8)) }
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

/// Whether `tool` is on the PATH.
public func toolIsInstalled(_ tool: String) -> Bool {
    let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
    return paths.contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)") }
}
