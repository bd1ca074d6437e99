public import Foundation

/// A fresh directory under the system's temporary directory, removed when the value is
/// released. Each test makes its own so tests never share files.
public final class TemporaryDirectory: Sendable {
    /// The directory's absolute path.
    public let path: String
    /// The directory as a file URL.
    public var url: URL { URL(fileURLWithPath: path, isDirectory: true) }

    /// Creates the directory, named after `label` so a leftover is easy to trace.
    public init(_ label: String = "strata-test") throws {
        let base = FileManager.default.temporaryDirectory.path
        let name = "\(label)-\(UUID().uuidString.prefix(8))"
        path = (base as NSString).appendingPathComponent(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the directory.
    public func file(_ name: String) -> String {
        (path as NSString).appendingPathComponent(name)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Deterministic pseudo-random numbers (SplitMix64), so randomized tests reproduce from a seed.
public struct SeededGenerator: RandomNumberGenerator {
    /// The state; the seed to start from.
    public var state: UInt64

    /// Starts from `seed`.
    public init(state seed: UInt64) { state = seed }

    /// Starts from `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
