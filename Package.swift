// swift-tools-version: 6.0
import PackageDescription

/// Settings every Strata target shares: Swift 6 language mode (complete strict
/// concurrency is part of it) and no implicit imports of Foundation's re-exports.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Strata",
    products: [
        .library(name: "Strata", targets: ["Strata"]),
        .executable(name: "strata", targets: ["strata"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // MARK: - C system libraries (named with the package prefix so they cannot
        // collide with another package's `CLMDB` or `CZstd`).
        .systemLibrary(
            name: "CStrataLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        .systemLibrary(
            name: "CStrataZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]
        ),

        // MARK: - Storage: safe Swift over LMDB and zstd. The only module that imports C.
        .target(
            name: "StrataStorage",
            dependencies: ["CStrataLMDB", "CStrataZstd"],
            swiftSettings: strictSettings
        ),

        // MARK: - The predicate language and the object model (pure Swift).
        .target(
            name: "StrataPredicate",
            swiftSettings: strictSettings
        ),
        .target(
            name: "StrataModel",
            dependencies: ["StrataPredicate"],
            swiftSettings: strictSettings
        ),

        // MARK: - The event log: append-only transactions, derived state, segments.
        .target(
            name: "StrataLog",
            dependencies: ["StrataStorage", "StrataModel"],
            swiftSettings: strictSettings
        ),

        // MARK: - The library users import.
        .target(
            name: "Strata",
            dependencies: ["StrataModel", "StrataPredicate", "StrataLog", "StrataStorage"],
            swiftSettings: strictSettings
        ),

        // MARK: - The command-line tool.
        .executableTarget(
            name: "strata",
            dependencies: [
                "Strata",
                "StrataStorage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/strata",
            swiftSettings: strictSettings
        ),

        // MARK: - Tests
        .target(
            name: "StrataTestSupport",
            dependencies: ["StrataModel"],
            path: "Tests/StrataTestSupport",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "StrataStorageProbe",
            dependencies: ["StrataStorage"],
            path: "Tests/StrataStorageProbe",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "StrataStorageTests",
            dependencies: ["StrataStorage", "CStrataLMDB", "StrataTestSupport", "StrataStorageProbe"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "StrataPredicateTests",
            dependencies: ["StrataPredicate", "StrataTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "StrataModelTests",
            dependencies: ["StrataModel", "StrataTestSupport"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "StrataLogProbe",
            dependencies: ["StrataLog", "StrataStorage", "StrataModel"],
            path: "Tests/StrataLogProbe",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "StrataLogTests",
            dependencies: ["StrataLog", "StrataStorage", "StrataTestSupport", "StrataLogProbe"],
            swiftSettings: strictSettings
        ),
        // MARK: - Context merging across processes (issue 8): a second process that saves
        // through a context, or watches the store through an automatically merging one.
        .executableTarget(
            name: "StrataContextProbe",
            dependencies: ["Strata", "StrataStorage", "StrataTestSupport"],
            path: "Tests/StrataContextProbe",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "StrataTests",
            // `strata`: built for the tests that run the CLI on a store they damaged.
            dependencies: ["Strata", "StrataTestSupport", "StrataContextProbe", "strata"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "StrataCLITests",
            // `StrataContextProbe`: a second process holding the store's writer lock.
            dependencies: ["strata", "Strata", "StrataTestSupport", "StrataLog", "StrataModel", "StrataStorage", "StrataContextProbe"],
            swiftSettings: strictSettings
        ),

        // MARK: - History (issue 8): the history API's tests and the writer process they spawn.
        .executableTarget(
            name: "StrataHistoryProbe",
            dependencies: ["Strata", "StrataTestSupport"],
            path: "Tests/StrataHistoryProbe",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "StrataHistoryTests",
            dependencies: ["Strata", "StrataTestSupport", "StrataHistoryProbe"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
