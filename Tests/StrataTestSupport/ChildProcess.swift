public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A child process started with `posix_spawn`, with the part of Foundation's `Process` API the
/// tests use.
///
/// Foundation's `Process.run()` on Linux (Swift 6.3.1) reads `/proc/self/fd` to close the
/// parent's descriptors in the child, copying each entry's whole 256-byte name field: when an
/// entry ends readdir's buffer and the next page is unmapped, the whole test process dies with
/// SIGSEGV (swift-corelibs-foundation PR #5472). Intermittent, and likelier the more entries
/// there are: two of four CI runs crashed so while the suite held ~2,000 descriptors (hundreds
/// of test stores open at once). So the tests start their children here instead: standard input, output and error
/// are set with `dup2` file actions, every other descriptor is closed in the child with
/// `posix_spawn_file_actions_addclosefrom_np`, and the signal mask and dispositions are reset
/// (a test thread may be blocking SIGPIPE, and an ignored SIGPIPE would survive the `exec`).
public final class ChildProcess: @unchecked Sendable {
    /// The program to run.
    public var executableURL: URL?
    /// The arguments after the program's own name.
    public var arguments: [String] = []
    /// The whole environment; nil inherits this process's.
    public var environment: [String: String]?
    /// The working directory; nil inherits this process's.
    public var currentDirectoryURL: URL?
    /// A `Pipe` (the child gets its reading end) or a `FileHandle`; nil inherits this process's.
    public var standardInput: Any?
    /// A `Pipe` (the child gets its writing end) or a `FileHandle`; nil inherits this process's.
    public var standardOutput: Any?
    /// A `Pipe` (the child gets its writing end) or a `FileHandle`; nil inherits this process's.
    public var standardError: Any?

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    // glibc's headers declare these two only for _GNU_SOURCE builds, which Swift's Glibc module
    // isn't; they are looked up by name.
    private static let closeFrom: CloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: CloseFrom.self)
    }
    private static let changeDirectory: ChangeDirectory? = dlsym(nil, "posix_spawn_file_actions_addchdir_np").map {
        unsafeBitCast($0, to: ChangeDirectory.self)
    }

    private let lock = NSLock()
    private var pid: pid_t = 0
    private var status: Int32?

    /// An error starting the child.
    public struct SpawnError: Error, CustomStringConvertible {
        /// What failed, with the `errno` text.
        public let description: String
    }

    public init() {}

    /// The child's process ID (0 before `run()`).
    public var processIdentifier: Int32 { lock.withLock { pid } }

    /// Starts the child. The parent's ends of the pipes stay open in this process; the child's
    /// ends are closed here once the child has them, as `Process` does.
    public func run() throws {
        guard let executableURL else { throw SpawnError(description: "no executable") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        let streams: [(Any?, Int32, Bool)] = [(standardInput, 0, true), (standardOutput, 1, false), (standardError, 2, false)]
        var closeInParent: [FileHandle] = []
        for (stream, target, reads) in streams {
            let source: Int32
            switch stream {
            case let pipe as Pipe:
                let end = reads ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                source = end.fileDescriptor
                closeInParent.append(end)
            case let handle as FileHandle where handle.fileDescriptor >= 0:
                source = handle.fileDescriptor
            case is FileHandle:  // `FileHandle.nullDevice` has no descriptor of its own
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", reads ? O_RDONLY : O_WRONLY, 0)
                continue
            default:
                continue
            }
            posix_spawn_file_actions_adddup2(&actions, source, target)
        }
        guard let closeFrom = Self.closeFrom, let changeDirectory = Self.changeDirectory else {
            throw SpawnError(description: "this C library has no posix_spawn_file_actions_addclosefrom_np/addchdir_np (glibc ≥ 2.34 has)")
        }
        _ = closeFrom(&actions, 3)
        if let currentDirectoryURL {
            _ = changeDirectory(&actions, currentDirectoryURL.path)
        }

        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        sigdelset(&everySignal, SIGKILL)
        sigdelset(&everySignal, SIGSTOP)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let path = executableURL.path
        let environment = (self.environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        let result = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw SpawnError(description: "posix_spawn \(path): \(String(cString: strerror(result)))")
        }
        lock.withLock { pid = child }
        for handle in closeInParent { try? handle.close() }
    }

    /// Waits for the child to exit (and reaps it).
    public func waitUntilExit() {
        let child: pid_t = lock.withLock { pid }
        guard child > 0, lock.withLock({ status }) == nil else { return }
        var raw: Int32 = 0
        while true {
            let reaped = waitpid(child, &raw, 0)
            if reaped == child { break }
            if reaped == -1 && errno == EINTR { continue }
            return
        }
        lock.withLock { status = raw }
    }

    /// Whether the child has started and not yet exited (reaps it if it has).
    public var isRunning: Bool {
        let child: pid_t = lock.withLock { pid }
        guard child > 0, lock.withLock({ status }) == nil else { return false }
        var raw: Int32 = 0
        let reaped = waitpid(child, &raw, WNOHANG)
        if reaped == child {
            lock.withLock { status = raw }
            return false
        }
        return reaped == 0
    }

    /// The exit status, or the number of the signal that ended the child.
    public var terminationStatus: Int32 {
        guard let raw = lock.withLock({ status }) else { return 0 }
        return raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
    }

    /// Whether the child exited or was ended by a signal.
    public var terminationReason: Process.TerminationReason {
        guard let raw = lock.withLock({ status }) else { return .exit }
        return raw & 0x7f == 0 ? .exit : .uncaughtSignal
    }

    /// Sends SIGTERM.
    public func terminate() {
        let child: pid_t = lock.withLock { pid }
        if child > 0, lock.withLock({ status }) == nil { _ = kill(child, SIGTERM) }
    }

    deinit {
        if pid > 0, status == nil {
            var raw: Int32 = 0
            if waitpid(pid, &raw, WNOHANG) == 0 {
                _ = kill(pid, SIGKILL)
                _ = waitpid(pid, &raw, 0)
            }
        }
    }
}
