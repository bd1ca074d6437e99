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
