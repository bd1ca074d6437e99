import Foundation
import StrataTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test support's `ChildProcess`, which every test that starts a child uses in place of
/// Foundation's `Process` (whose `run()` crashes the test process once more than about 1,365
/// descriptors are open).
@Suite struct ChildProcessTests {
    /// Foundation's crash is intermittent (it needs a directory entry at the very end of
    /// readdir's buffer with an unmapped page after it), so this shows `ChildProcess` working
    /// at the descriptor count a full parallel run reached, not `Process` failing there.
    @Test("a child starts, gets its input and its output and error are read while this process holds 1,600 more open descriptors (about what a full parallel test run held)")
    func manyOpenDescriptors() throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let wanted = rlim_t(4096)
        if limit.rlim_cur < wanted {
            limit.rlim_cur = min(wanted, limit.rlim_max)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        try #require(limit.rlim_cur >= 2000, "the hard descriptor limit (\(limit.rlim_max)) is too low to hold 1,600 more")
        var opened: [Int32] = []
        defer { for fd in opened { close(fd) } }
        for _ in 0..<1600 {
            let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            try #require(fd >= 0)
            opened.append(fd)
        }
        let result = try runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", "read line; echo \"got $line\"; echo oops >&2; exit 7"], input: "hello\n")
        #expect(result.status == 7)
        #expect(result.standardOutput == "got hello\n")
        #expect(result.standardError == "oops\n")
    }

    @Test("the child holds only standard input, output and error: a descriptor this process left inheritable is closed in it")
    func onlyStandardDescriptors() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)  // no O_CLOEXEC: Process would pass these on if it didn't close them
        defer { close(ends[0]); close(ends[1]) }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "ls /proc/self/fd"]
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let listed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
        // `ls` itself holds one more: the directory it is listing.
        let descriptors = listed.split(separator: "\n").compactMap { Int($0) }.filter { $0 > 2 }
        #expect(descriptors.count <= 1, "\(listed)")
    }

    @Test("a signal's end is reported as the signal (SIGTERM, SIGKILL), an exit as its status; isRunning follows the child")
    func terminationReasons() throws {
        let sleeper = ChildProcess()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["30"]
        try sleeper.run()
        #expect(sleeper.isRunning)
        #expect(sleeper.processIdentifier > 0)
        sleeper.terminate()
        sleeper.waitUntilExit()
        #expect(!sleeper.isRunning)
        #expect(sleeper.terminationReason == .uncaughtSignal)
        #expect(sleeper.terminationStatus == SIGTERM)

        let killed = ChildProcess()
        killed.executableURL = URL(fileURLWithPath: "/bin/sleep")
        killed.arguments = ["30"]
        try killed.run()
        _ = kill(killed.processIdentifier, SIGKILL)
        killed.waitUntilExit()
        #expect(killed.terminationReason == .uncaughtSignal)
        #expect(killed.terminationStatus == SIGKILL)

        let exiting = ChildProcess()
        exiting.executableURL = URL(fileURLWithPath: "/bin/sh")
        exiting.arguments = ["-c", "exit 3"]
        try exiting.run()
        exiting.waitUntilExit()
        #expect(exiting.terminationReason == .exit)
        #expect(exiting.terminationStatus == 3)
    }

    @Test("the working directory and the environment given reach the child; no signal is blocked there even when this thread blocks SIGPIPE")
    func directoryEnvironmentAndSignals() throws {
        let dir = try TemporaryDirectory()
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        // A blocked SIGPIPE would survive the `exec`: a child writing to a closed pipe would
        // then get EPIPE instead of dying, as `yes | head -1` relies on.
        let result = try runProcess(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "pwd; echo \"$STRATA_CHILD_TEST\"; grep SigBlk /proc/self/status"],
            environment: ["STRATA_CHILD_TEST": "seen"], currentDirectory: dir.url)
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(lines.first == dir.url.resolvingSymlinksInPath().path || lines.first == dir.url.path, "\(lines)")
        #expect(lines.dropFirst().first == "seen", "\(lines)")
        #expect(lines.last == "SigBlk:\t0000000000000000", "\(lines)")
    }
}
