// swift-tools-version: 6.0
// The floor of `qosmap lookup dscp 46`'s start-up (tools/bench/startup): a
// root command and one `lookup`-shaped subcommand on ArgumentParser 1.8.2,
// nothing else. Not product code.
import PackageDescription

let package = Package(
    name: "startup-floor",
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2")
    ],
    targets: [
        .executableTarget(
            name: "floor",
            dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")]),
        // The same output with no ArgumentParser: the Swift runtime's own floor.
        .executableTarget(name: "floor-plain"),
    ],
    swiftLanguageModes: [.v6]
)
