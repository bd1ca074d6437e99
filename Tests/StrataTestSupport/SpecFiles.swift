public import Foundation

/// Locates files under the package's `Specs/` folder, so tests run the normative test
/// vectors that live beside each spec rather than private copies.
public enum SpecFiles {
    /// The package root, found from this source file's location.
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // StrataTestSupport
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // package root

    /// The URL of `relativePath` inside `Specs/`.
    public static func url(_ relativePath: String) -> URL {
        packageRoot.appendingPathComponent("Specs").appendingPathComponent(relativePath)
    }

    /// The contents of `relativePath` inside `Specs/`.
    public static func data(_ relativePath: String) throws -> Data {
        try Data(contentsOf: url(relativePath))
    }
}
