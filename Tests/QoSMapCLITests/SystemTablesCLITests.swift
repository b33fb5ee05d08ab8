import Foundation
import Testing

/// Issue 13 item 2: one broken file in the system directory does not stop
/// commands that do not need it; `validate` still fails on it.
@Test func item2_aBrokenSystemFileIsSkippedWithAWarning() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qosmap-sys-\(UUID())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    try "domain: bad\ncolour: red\n".write(
        to: dir.appendingPathComponent("a-bad.yaml"), atomically: true, encoding: .utf8)
    try "domain: gold\nimport: default\n".write(
        to: dir.appendingPathComponent("b-gold.yaml"), atomically: true, encoding: .utf8)
    let env = ["QOSMAP_DOMAINS_DIR": dir.path]
    let bad = dir.path + "/a-bad.yaml"

    let lookup = try qosmap(["lookup", "dscp", "46"], environment: env)
    #expect(lookup.status == 0)
    #expect(lookup.out.contains("EF"))
    let lines = lookup.err.split(separator: "\n").map(String.init)
    #expect(lines.count == 2, "\(lookup.err)")
    #expect(lines.first?.hasPrefix("\(bad):2:1: warning: ") == true, "\(lookup.err)")
    #expect(lines.last == "\(bad): warning: file skipped; run 'qosmap validate \(bad)' for its errors")

    // The good file beside it still loads.
    let domains = try qosmap(["domains"], environment: env)
    #expect(domains.status == 0)
    #expect(domains.out.contains("gold"))
    #expect(!domains.out.contains("bad "))

    let validate = try qosmap(["validate", bad], environment: env)
    #expect(validate.status == 65)
    #expect(validate.err.hasPrefix("\(bad):2:1: "))

    // A broken file named with --tables still fails the command.
    let explicit = try qosmap(["domains", "--tables", dir.path, "--no-system-tables"], environment: env)
    #expect(explicit.status == 65)
}
