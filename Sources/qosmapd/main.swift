import ArgumentParser
import Logging
import Metrics
import Prometheus
import QoSMapDaemon
import QoSMapVersion
import ServiceLifecycle

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `qosmapd [--config FILE]`: the nfqueue QoS remarking daemon.
@main
struct QoSMapD: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "qosmapd",
        abstract:
            "Remark DSCP (and set skb mark/priority) on packets queued by iptables -j NFQUEUE, or in the kernel (datapath: ebpf).",
        discussion: """
            Without --config the embedded default is used (print it with --print-default-config). \
            SIGHUP reloads config and tables; SIGTERM unbinds and exits. Counters: \
            curl -s http://127.0.0.1:PORT/metrics
            """,
        version: QoSMapVersion.current)

    @Option(name: .long, help: ArgumentHelp("The YAML config file.", valueName: "FILE"), completion: .file())
    var config: String?

    @Option(name: .long, help: "The log level.")
    var logLevel: Logger.Level = .info

    @Flag(name: .long, help: "Print the embedded default config and exit.")
    var printDefaultConfig = false

    @Flag(name: .long, help: "Check the config and tables, then exit (0 if usable, 65 if not).")
    var check = false

    @Flag(
        name: .long,
        help: """
            Remove what a qosmapd that did not stop cleanly left in this network namespace's kernel \
            (tc filters, IFBs qmi-*, iptables chains, queues 7173:, nftables tables inet qosmap*), one line each, \
            then exit; refused (75) while a qosmapd runs here.
            """)
    var cleanup = false

    /// --cleanup reads no config: combining it with another mode is a mistake.
    func validate() throws {
        if cleanup, check || printDefaultConfig || config != nil {
            throw ValidationError("--cleanup takes no other option; allowed alone: qosmapd --cleanup")
        }
    }

    /// Parses and runs; a bad command-line token is one line on stderr and
    /// exit 64, without ArgumentParser's usage block.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            guard exitCode(for: error) == .validationFailure else { exit(withError: error) }
            // ArgumentParser puts six or more allowed values on lines of their own.
            let line = message(for: error).replacing(":\n  - ", with: ": ")
                .replacing("\n  - ", with: ", ")
            writeStandardError("qosmapd: error: \(line)\n")
            exit(withError: ExitCode.validationFailure)
        }
    }

    func run() async throws {
        // A client that resets must cost one write (EPIPE), not the daemon and all queued traffic.
        signal(SIGPIPE, SIG_IGN)
        if printDefaultConfig {
            print(DaemonConfig.embeddedDefault)
            return
        }
        if cleanup {
            // No config is read: what is left may come from any config.
            if let running = KernelCleanup.runningDaemon() {
                writeStandardError("qosmapd: error: --cleanup refused: \(running); stop it first\n")
                throw ExitCode(75)  // EX_TEMPFAIL: try again once it stopped
            }
            let outcome = KernelCleanup.run()
            for line in outcome.removed { print(line) }
            for line in outcome.errors { writeStandardError("qosmapd: error: \(line)\n") }
            if outcome.removed.isEmpty && outcome.errors.isEmpty { print("nothing to remove") }
            if !outcome.errors.isEmpty { throw ExitCode(1) }
            return
        }
        LoggingSystem.bootstrap { [logLevel] label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = logLevel
            return h
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "qosmapd")

        let snapshot: PolicySnapshot
        do {
            snapshot = try QueueService.load(config, generation: 0)
            // The ebpf datapath's limits (policies per map) are part of the check.
            if snapshot.config.datapath == .ebpf { _ = try EBPFTables(snapshot) }
        } catch {
            writeStandardError(error.description + "\n")
            throw ExitCode(65)
        }
        if check {
            print("config OK: domains \(snapshot.tables.domains.names.joined(separator: ", "))")
            return
        }
        // Before anything is attached or bound: a daemon that may never open
        // AF_PACKET sockets (a systemd unit without CAP_NET_RAW or without
        // AF_PACKET in RestrictAddressFamilies=) would start with dns: rules
        // that never match. Exit 77 (EX_NOPERM), which the unit does not restart.
        if !snapshot.config.classify.dns.snoop.isEmpty, let problem = DNSSnoopService.startupProblem() {
            writeStandardError("qosmapd: error: \(problem)\n")
            throw ExitCode(77)
        }
        // The egress queues before any packet is marked: an operator's root
        // qdisc is refused here, in one line, before anything is attached,
        // and after the checks that exit, so that none leaves a tree behind.
        let egressQueues: EgressQueues
        do {
            egressQueues = try EgressQueues(logger: logger, colorAware: snapshot.config.datapath == .ebpf)
        } catch {
            writeStandardError("qosmapd: error: \(error)\n")
            throw ExitCode(65)
        }
        do {
            try egressQueues.start(snapshot.config.interfaceQueues, download: snapshot.downloadPlans())
        } catch {
            // What was built for the interfaces before the one that failed goes too.
            egressQueues.removeAll()
            writeStandardError("qosmapd: error: \(error)\n")
            throw ExitCode(error.unavailable ? 77 : 65)
        }
        // Always built, so that a reload can enable, move or disable it; with
        // port 0 it only waits for shutdown.
        let server = MetricsServer(registry: registry, port: snapshot.config.metricsPort, logger: logger)
        if snapshot.config.datapath == .ebpf {
            // No queues and no NFQUEUE rules: the tables run in the kernel.
            let datapath = EBPFDatapath(
                configPath: config, snapshot: snapshot, metrics: DaemonMetrics(), logger: logger,
                notifier: SystemdNotifier(), metricsEndpoint: server)
            let status: [ServiceGroupConfiguration.ServiceConfiguration]
            do {
                let collector = StatusCollector(store: datapath.store, registry: registry, ebpf: datapath)
                status = try statusServices(snapshot, logger, collector)
            } catch {
                egressQueues.removeAll()
                writeStandardError("qosmapd: error: \(error)\n")
                throw ExitCode(1)
            }
            var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
                .init(service: datapath), .init(service: server),
                .init(service: EgressQueueService(queues: egressQueues, store: datapath.store)),
            ]
            services += dnsServices(snapshot, logger) + status
            var groupConfig = ServiceGroupConfiguration(services: services, logger: logger)
            groupConfig.gracefulShutdownSignals = [.sigterm, .sigint]
            do {
                try await ServiceGroup(configuration: groupConfig).run()
            } catch {
                datapath.stop()
                logger.critical("qosmapd stopped", metadata: ["error": "\(error)"])
                // 77 (EX_NOPERM) when the kernel or the process's rights refuse
                // the classifier: a restart would be refused alike.
                throw ExitCode((error as? EBPFError)?.denied == true ? 77 : 1)
            }
            return
        }
        // A classifier that a killed ebpf qosmapd left would mark over this
        // datapath's work: removed unless a running qosmapd holds its interface.
        EBPFDatapath.removeStaleClassifiers(logger: logger, metrics: AttachmentMetrics())
        let service = QueueService(
            configPath: config, snapshot: snapshot, metrics: DaemonMetrics(), logger: logger,
            notifier: SystemdNotifier(), metricsEndpoint: server)
        let queueService = EgressQueueService(queues: egressQueues, store: service.store)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: service), .init(service: server), .init(service: queueService),
        ]
        services += dnsServices(snapshot, logger)
        do {
            services += try statusServices(
                snapshot, logger, StatusCollector(store: service.store, registry: registry))
        } catch {
            queueService.stop()
            writeStandardError("qosmapd: error: \(error)\n")
            throw ExitCode(1)
        }
        // rules: install (see RuleService): installed before the queues are
        // bound, so packets in the first milliseconds are bypassed and counted
        // as fail-open; the service is last so it shuts down (removing the
        // rules) before the queues unbind.
        let rules = RuleManager(logger: logger)
        do {
            try rules.apply(snapshot.config)
        } catch {
            logger.critical("cannot install NFQUEUE rules", metadata: ["error": "\(error)"])
            rules.remove()
            queueService.stop()
            throw ExitCode(1)
        }
        services.append(
            .init(
                service: RuleService(
                    manager: rules, store: service.store, metrics: RuleMetrics(), logger: logger)))
        var groupConfig = ServiceGroupConfiguration(services: services, logger: logger)
        groupConfig.gracefulShutdownSignals = [.sigterm, .sigint]
        let group = ServiceGroup(configuration: groupConfig)
        do {
            try await group.run()
        } catch {
            rules.remove()
            logger.critical("qosmapd stopped", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
        rules.remove()  // normally done already by RuleService at shutdown
    }
}

/// dns: rules: replies read on classify.dns.snoop (only when the config
/// names interfaces), addresses expired by a timer (started even with no dns
/// rule yet, so that a reload can add some).
func dnsServices(_ snapshot: PolicySnapshot, _ logger: Logger) -> [ServiceGroupConfiguration
    .ServiceConfiguration]
{
    var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
    let interfaces = snapshot.config.classify.dns.snoop
    if !interfaces.isEmpty {
        let snoop = DNSSnoopService(interfaces: interfaces, logger: logger) { reply in
            DNSLearning.shared.observe(reply)
        }
        DNSLearning.shared.attach(snoop)
        services.append(.init(service: snoop))
    }
    services.append(.init(service: DNSSweepService()))
    return services
}

/// The status socket (`status: {socket:}`), bound now so that a bad path
/// fails the start in one line; none when the socket is "" (the default).
func statusServices(_ snapshot: PolicySnapshot, _ logger: Logger, _ collector: StatusCollector) throws
    -> [ServiceGroupConfiguration.ServiceConfiguration]
{
    let path = snapshot.config.statusSocket
    guard !path.isEmpty else { return [] }
    let server = try StatusServer(path: path, group: snapshot.config.statusGroup, logger: logger) { limit in
        collector.report(limit: limit)
    }
    return [.init(service: server)]
}

// The conformance lives here, in the executable: the daemon library does not
// depend on ArgumentParser.
extension Logger.Level: @retroactive ExpressibleByArgument {}

/// Writes all of `text` to standard error (`write(2)`, retried on `EINTR` and
/// short writes): FileHandle is not in FoundationEssentials.
func writeStandardError(_ text: String) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let n = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        guard n > 0 else { return }
        bytes = bytes.dropFirst(n)
    }
}
