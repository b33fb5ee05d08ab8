/// What a reload needs from the `/metrics` listener: moving it to the port a
/// new config names. ``QueueService`` calls it before committing a reload, so
/// a port that cannot be bound fails the reload and the old listener stays.
public protocol MetricsEndpoint: Sendable {
    /// The port listened on; 0 when the endpoint is disabled.
    var port: UInt16 { get }
    /// Listens on `port` (0 disables the endpoint). The new port is bound
    /// before the old listener closes; on error the old one stays in force.
    func rebind(port: UInt16) throws
}
