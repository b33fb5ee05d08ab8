// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "qosmap",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "QoSMapCore", targets: ["QoSMapCore"]),
        .library(name: "QoSMapTables", targets: ["QoSMapTables"]),
        .executable(name: "qosmap", targets: ["qosmap"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
    ],
    targets: [
        // Layer 1: pure Swift, no C, no Foundation.
        .target(name: "QoSMapCore"),
        // Layer 1: table loading (Yams) and the built-in tables compiled in from Tables/.
        .target(
            name: "QoSMapTables",
            dependencies: ["QoSMapCore", .product(name: "Yams", package: "Yams")],
            plugins: ["EmbedTables"]),
        .executableTarget(name: "qosmap-embed-tables"),
        .plugin(name: "EmbedTables", capability: .buildTool(), dependencies: ["qosmap-embed-tables"]),

        // Layer 5: the CLI. Commands live in a library so tests can drive them.
        .target(
            name: "QoSMapCLI",
            dependencies: [
                "QoSMapCore", "QoSMapTables",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .executableTarget(name: "qosmap", dependencies: ["QoSMapCLI"]),

        .testTarget(name: "QoSMapCoreTests", dependencies: ["QoSMapCore"]),
        .testTarget(name: "QoSMapTablesTests", dependencies: ["QoSMapCore", "QoSMapTables"]),
        .testTarget(name: "QoSMapCLITests", dependencies: ["QoSMapCLI", "qosmap"]),
    ],
    swiftLanguageModes: [.v6]
)
