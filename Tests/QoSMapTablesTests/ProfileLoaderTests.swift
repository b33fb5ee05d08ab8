import Foundation
import QoSMapCore
import QoSMapTables
import Testing

/// Loads `text` as one user table file, `user.yaml`, beside the built-ins.
func loadUserTable(_ text: String) -> Result<TableSet, TableLoadError> {
    Result { () throws(TableLoadError) in
        try TableLoader.load([TableSource(path: "user.yaml", text: text)])
    }
}

/// User profile files: same loader, same positioned diagnostics.
struct ProfileLoaderTests {
    @Test func userProfileLoads() throws {
        let set = try loadUserTable("profile: mine\nrows:\n  - {name: Voice, dscp: EF, pcp: 5}\n").get()
        let p = try #require(set.profiles["mine"])
        #expect(p.rows.first?.dscp == .ef)
        #expect(p.rows.first?["pcp"]?.integer == 5)
        #expect(set.profiles["rfc4594"] != nil)
    }

    @Test(arguments: [
        (
            "profile: m\nrows:\n  - name: A\n    phb: EF\n    dscp: 48\n", 5, 11,
            "dscp 48 contradicts PHB name 'EF'"
        ),
        (
            "profile: m\nrows:\n  - {name: A, dscp: \"0x0E(14)\", phb: AF11}\n", 3, 21,
            "contradicts PHB name 'AF11'"
        ),
        ("profile: m\nrows:\n  - {name: A, dscp: \"EF(48)\"}\n", 3, 21, "PHB EF is 46, not 48"),
    ])
    func nameValueMismatchWarns(text: String, line: Int, column: Int, message: String) throws {
        let set = try loadUserTable(text).get()
        let w = try #require(set.warnings.first)
        #expect(w.severity == .warning)
        #expect(w.line == line && w.column == column, "\(w)")
        #expect(w.message.contains(message), "\(w)")
    }

    @Test(arguments: [
        ("profile: m\nrows:\n  - {name: A, dscp: 99}\n", 3, 21, "dscp value 99 is out of range"),
        ("profile: m\nrows:\n  - {name: A, colour: red}\n", 3, 15, "unknown column 'colour'"),
        ("profile: m\nrows:\n  - {dscp: 1}\n", 3, 5, "needs a 'name'"),
        ("profile: m\nrows:\n  - {name: A, via: B}\n", 3, 20, "unknown row 'B' in 'via'"),
        ("profile: rfc4594\nrows:\n  - {name: A}\n", 1, 10, "built in and cannot be redefined"),
        ("profile: m\ndomain: d\nrows: []\n", 1, 1, "not both"),
        ("profile: m\nrows:\n  - {name: A, resourceType: GRB}\n", 3, 29, "allowed: GBR, Non-GBR"),
    ])
    func errorsArePositioned(text: String, line: Int, column: Int, message: String) throws {
        guard case .failure(let error) = loadUserTable(text) else {
            Issue.record("expected an error for \(text)")
            return
        }
        let d = try #require(error.diagnostics.first { $0.severity == .error })
        #expect(d.file == "user.yaml")
        #expect(d.line == line && d.column == column, "\(d)")
        #expect(d.message.contains(message), "\(d)")
    }

    @Test func domainDSCPNameValueWarns() throws {
        let set = try loadUserTable("domain: d1\nimport: default\noutbound:\n  dscp:\n    EF: \"EF(48)\"\n")
            .get()
        let w = try #require(set.warnings.first)
        #expect(w.line == 5 && w.column == 9)
        #expect(set.domains["d1"]?.dscp(for: Treatment(.ef, .green)).rawValue == 48)
    }

    /// The compiled-in profiles are what the loader makes of Tables/profiles/
    /// read from disk through the directory reader the CLI and daemon use.
    @Test func builtInProfilesAreTheFilesOnDisk() throws {
        let dir = tablesDirectory.appendingPathComponent("profiles").path
        let fromDisk = try TableLoader.load(
            TableLoader.sources(inDirectory: dir), onto: TableSet(domains: DomainSet()), builtIn: true)
        #expect(!fromDisk.profiles.names.isEmpty)
        #expect(fromDisk.profiles.names.sorted() == TableLoader.builtIn.profiles.names.sorted())
        for profile in fromDisk.profiles.profiles {
            #expect(profile.isBuiltIn)
            #expect(TableLoader.builtIn.profiles[profile.name] == profile, "profile '\(profile.name)'")
        }
        // A user batch never marks its profiles built in.
        let user = try TableLoader.load(
            TableLoader.sources(inDirectory: dir), onto: TableSet(domains: DomainSet()))
        #expect(user.profiles.profiles.allSatisfy { !$0.isBuiltIn })
    }
}
