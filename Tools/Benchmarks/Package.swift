// swift-tools-version: 6.0
import PackageDescription

// Strata's benchmarks, in their own package so GRDB (a benchmark-only peer) never reaches
// users of the library. Run from this directory:
//
//     swift run -c release StrataBenchmarks [filter]
let package = Package(
    name: "StrataBenchmarks",
    dependencies: [
        .package(name: "Strata", path: "../.."),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // The raw-LMDB floor writes through LMDB's C API directly, not through Strata's
        // storage layer. Named with the package prefix so it can't collide with Strata's own
        // `CStrataLMDB`.
        .systemLibrary(
            name: "CBenchLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        .executableTarget(
            name: "StrataBenchmarks",
            dependencies: [
                .product(name: "Strata", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
                "CBenchLMDB",
            ],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
