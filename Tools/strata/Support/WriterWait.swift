import ArgumentParser
import Foundation
import StrataStorage

/// How long a command that writes (`compact`, `revert`) waits for another process's write
/// transaction: `--wait SECONDS` (default 60), `--wait 0` (give up at once), `--wait forever`.
///
/// LMDB lets one write transaction run at a time, across processes; a second writer waits in
/// LMDB's lock, silently, for as long as the first runs (before session 34 the command just
/// hung). While waiting, the command says on standard error which process holds the lock;
/// when the wait runs out it fails, exit 1, naming it.
struct WriterWaitOptions: ParsableArguments {
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "How long to wait for another process's write transaction before giving up: seconds (0: don't wait), or 'forever'.",
            valueName: "seconds|forever"))
    var wait: WaitTime = .seconds(60)

    /// Makes this process's writes wait so (``LMDBEnvironment/setWriterLockWait(_:)``).
    func install(store: String) {
        let timeout: Double? = if case .seconds(let s) = wait { s } else { nil }
        let limit = timeout.map { "; giving up after \(WaitTime.text($0)) (--wait)" } ?? " (--wait forever)"
        LMDBEnvironment.setWriterLockWait(WriterLockWait(timeout: timeout) { holder in
            printError("strata: the store \(store) is busy: \(holder) holds its write lock (a write transaction is open there); waiting for it\(limit)")
        })
    }
}

/// `--wait`'s value.
enum WaitTime: ExpressibleByArgument, Sendable, Equatable {
    case seconds(Double)
    case forever

    init?(argument: String) {
        if argument == "forever" {
            self = .forever
        } else if let seconds = Double(argument), seconds.isFinite, seconds >= 0 {
            self = .seconds(seconds)
        } else {
            return nil
        }
    }

    var defaultValueDescription: String {
        switch self {
        case .seconds(let s): Self.text(s).replacingOccurrences(of: " s", with: "")
        case .forever: "forever"
        }
    }

    /// `60 s`, `0.5 s`.
    static func text(_ seconds: Double) -> String {
        seconds == seconds.rounded() && seconds < 1e15 ? "\(Int64(seconds)) s" : "\(seconds) s"
    }
}
