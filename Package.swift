// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "qosmap",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "QoSMapCore", targets: ["QoSMapCore"]),
        .library(name: "QoSMapTables", targets: ["QoSMapTables"]),
        .library(name: "QoSMapPacket", targets: ["QoSMapPacket"]),
        .library(name: "NFQueue", targets: ["NFQueue"]),
        .executable(name: "qosmap", targets: ["qosmap"]),
        .executable(name: "qosmapd", targets: ["qosmapd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        // Layer 1: pure Swift, no C, no Foundation. Codepoints, classes, colors, domains.
        .target(name: "QoSMapCore"),
        // Layer 0: the YAML reader the table format is written in: libyaml
        // (Debian's) and the node tree QoSMapYAML composes from its events.
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .target(name: "QoSMapYAML", dependencies: ["CYAML"]),

        // Layer 1: the table file format and its loader.
        .target(name: "QoSMapTableFormat", dependencies: ["QoSMapCore", "QoSMapYAML"]),
        // Layer 1: the built-in tables, compiled in from Tables/ at build time by
        // running the loader above (re-exports it).
        .target(
            name: "QoSMapTables",
            dependencies: ["QoSMapCore", "QoSMapTableFormat"],
            plugins: ["EmbedTables"]),
        .executableTarget(name: "qosmap-embed-tables", dependencies: ["QoSMapCore", "QoSMapTableFormat"]),
        .plugin(name: "EmbedTables", capability: .buildTool(), dependencies: ["qosmap-embed-tables"]),
        // Layer 1: the version, from debian/changelog's first entry at build time
        // (one source for --version and the Debian package).
        .target(name: "QoSMapVersion", plugins: ["EmbedVersion"]),
        .executableTarget(name: "qosmap-embed-version"),
        .plugin(name: "EmbedVersion", capability: .buildTool(), dependencies: ["qosmap-embed-version"]),
        // Layer 1: device configuration formats (SONiC, Junos, IOS-XR, Linux):
        // domains to text and back; pure Swift with Foundation's JSON.
        .target(name: "QoSMapDevices", dependencies: ["QoSMapCore", "QoSMapTableFormat"]),

        // Layer 2: pure-Swift packet parser and in-place remarker.
        .target(name: "QoSMapPacket", dependencies: ["QoSMapCore"]),

        // Layer 3: C system libraries and the shim for macros Swift cannot import.
        .systemLibrary(
            name: "CPcap", providers: [.apt(["libpcap-dev"])]),
        .systemLibrary(
            name: "CNetfilterQueue", pkgConfig: "libnetfilter_queue",
            providers: [.apt(["libnetfilter-queue-dev"])]),
        .systemLibrary(name: "CMnl", pkgConfig: "libmnl", providers: [.apt(["libmnl-dev"])]),
        .target(name: "CQoSMapShim", dependencies: ["CNetfilterQueue", "CMnl"]),
        .systemLibrary(name: "CBPF", pkgConfig: "libbpf", providers: [.apt(["libbpf-dev"])]),
        // AF_PACKET sockets and classic BPF socket filters (kernel headers only, no library).
        .systemLibrary(name: "CPacketSocket"),

        // The EINTR loop the layer-4 wrappers share (they may not import each other).
        .target(name: "Syscall", dependencies: [.product(name: "SystemPackage", package: "swift-system")]),

        // Layer 4: typed Swift wrappers over the C libraries.
        .target(name: "QoSMapCapture", dependencies: ["CPcap"]),
        .target(
            name: "NFQueue",
            dependencies: [
                "CNetfilterQueue", "CMnl", "CQoSMapShim", "Syscall",
                .product(name: "SystemPackage", package: "swift-system"),
            ]),
        .target(
            name: "PacketSocket",
            dependencies: [
                "CPacketSocket", "Syscall", .product(name: "SystemPackage", package: "swift-system"),
            ]),
        .target(
            name: "BPFClassifier",
            dependencies: ["CBPF", .product(name: "SystemPackage", package: "swift-system")]),
        // tc through rtnetlink: qdiscs, HTB classes and IFB links by ifindex (issue 38).
        .target(
            name: "TrafficShaping",
            dependencies: ["CMnl", .product(name: "SystemPackage", package: "swift-system")]),

        // Layer 5: the CLI (commands in a library so tests can drive them) and the daemon.
        .target(
            name: "QoSMapCLI",
            dependencies: [
                "QoSMapCore", "QoSMapTables", "QoSMapPacket", "QoSMapCapture", "QoSMapDevices",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // QoSMapYAML: the nodes YAMLContext walks, to read a qosmapd config for
                // `export nft --config` (QoSMapDaemon links libmnl, which has no
                // static archive, and qosmap is built static).
                "QoSMapYAML",
            ]),
        .executableTarget(name: "qosmap", dependencies: ["QoSMapCLI", "QoSMapVersion"]),
        .target(
            name: "QoSMapDaemon",
            dependencies: [
                "QoSMapCore", "QoSMapTables", "QoSMapPacket", "NFQueue", "BPFClassifier", "QoSMapYAML",
                "PacketSocket", "TrafficShaping",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                // swift-nio: the /metrics HTTP server (see MetricsServer.swift for why NIO).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            // The tc classifier (Bpf/qosmap.bpf.c), compiled with clang and embedded.
            plugins: ["EmbedBPF"]),
        .executableTarget(name: "qosmap-embed-bpf"),
        .plugin(name: "EmbedBPF", capability: .buildTool(), dependencies: ["qosmap-embed-bpf"]),
        .executableTarget(
            name: "qosmapd",
            dependencies: [
                "QoSMapDaemon", "QoSMapVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),

        // Release-mode benchmark harness (not a test).
        .executableTarget(
            name: "qosmap-bench", dependencies: ["QoSMapCore", "QoSMapTables", "QoSMapPacket"]),
        .executableTarget(
            name: "qosmap-bench-ebpf", dependencies: ["QoSMapCore", "QoSMapDaemon", "BPFClassifier"]),

        .testTarget(name: "QoSMapCoreTests", dependencies: ["QoSMapCore"]),
        .testTarget(name: "QoSMapTablesTests", dependencies: ["QoSMapCore", "QoSMapTables"]),
        .testTarget(
            name: "QoSMapDevicesTests", dependencies: ["QoSMapCore", "QoSMapTables", "QoSMapDevices"],
            exclude: ["Data"]),
        .testTarget(name: "QoSMapPacketTests", dependencies: ["QoSMapCore", "QoSMapTables", "QoSMapPacket"]),
        .testTarget(
            name: "NFQueueTests",
            dependencies: ["NFQueue", "Syscall", .product(name: "SystemPackage", package: "swift-system")]),
        .testTarget(
            name: "BPFClassifierTests",
            dependencies: ["BPFClassifier", .product(name: "SystemPackage", package: "swift-system")]),
        // QoSMapCore: the HTB plans the tests build in the kernel.
        .testTarget(
            name: "TrafficShapingTests",
            dependencies: [
                "TrafficShaping", "QoSMapCore", .product(name: "SystemPackage", package: "swift-system"),
            ]),
        .testTarget(
            name: "QoSMapDaemonTests",
            dependencies: [
                "QoSMapDaemon", "BPFClassifier",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ]),
        // QoSMapDaemon: export nft --config is checked against qosmapd's own policies.
        .testTarget(
            name: "QoSMapCLITests", dependencies: ["QoSMapCLI", "qosmap", "QoSMapPacket", "QoSMapDaemon"],
            exclude: ["Golden", "Captures"]),
    ],
    swiftLanguageModes: [.v6]
)
