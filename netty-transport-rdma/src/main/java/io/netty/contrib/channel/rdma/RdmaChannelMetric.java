package io.netty.contrib.channel.rdma;

/**
 * What an {@link RdmaChannel}'s connection has done so far ({@link RdmaChannel#metric()}), in Netty's style of
 * {@code ByteBufAllocatorMetric}: live counters, kept by the channel's event loop with plain increments, so they
 * cost nothing when nobody reads them; read from another thread, a value may lag behind the loop slightly. All
 * are 0 before the connection exists and keep their last values after it is closed.
 */
public final class RdmaChannelMetric {
    private final RdmaChannel channel;

    RdmaChannelMetric(RdmaChannel channel) {
        this.channel = channel;
    }

    private ConnectionCounters c() {
        ConnectionCounters c = channel.counters;
        return c == null ? EMPTY : c;
    }

    private static final ConnectionCounters EMPTY = new ConnectionCounters();

    /** Payload bytes posted to the peer (SENDs and ring writes). */
    public long bytesWritten() {
        return c().bytesWritten;
    }

    /** Payload bytes handed to the pipeline. */
    public long bytesRead() {
        return c().bytesRead;
    }

    /** DATA messages sent by SEND (a coalesced SEND counts once). */
    public long sends() {
        return c().sends;
    }

    /** RDMA WRITE WITH IMMEDIATE into the peer's receive ring. */
    public long ringWrites() {
        return c().ringWrites;
    }

    /** Writes that travelled copied together with others ({@link RdmaChannelOption#WRITE_COALESCE_THRESHOLD}). */
    public long coalescedWrites() {
        return c().coalescedWrites;
    }

    /** Work requests (SENDs or ring writes) that carried coalesced writes. */
    public long coalescedSends() {
        return c().coalescedSends;
    }

    /** Times writing stopped because the peer had granted no receive credit or ring space. */
    public long creditStalls() {
        return c().creditStalls;
    }

    /** Nanoseconds writing spent stopped for want of credit or ring space (finished stalls). */
    public long creditStallNanos() {
        return c().creditStallNanos;
    }

    /** Receive rings this side registered and offered to the peer. */
    public long ringsOffered() {
        return c().ringsOffered;
    }

    /** Receive rings withdrawn after a second without writes. */
    public long ringsWithdrawn() {
        return c().ringsWithdrawn;
    }

    /** Messages (or parts of them) copied into buffers of the channel's allocator on the way to the pipeline. */
    public long copies() {
        return c().copies;
    }

    /**
     * Messages handed to the pipeline without a copy ({@link RdmaChannelOption#RECEIVE_ZERO_COPY}): ring writes as
     * buffers over the ring, SENDs as buffers over their receive slot.
     */
    public long zeroCopyBuffers() {
        return c().zeroCopyBuffers;
    }

    /** Zero-length RDMA WRITEs that probed the peer of an idle connection ({@code SO_KEEPALIVE}). */
    public long keepAliveProbes() {
        return c().keepAliveProbes;
    }

    @Override
    public String toString() {
        ConnectionCounters c = c();
        return "RdmaChannelMetric{bytesWritten=" + c.bytesWritten + ", bytesRead=" + c.bytesRead + ", sends="
                + c.sends + ", ringWrites=" + c.ringWrites + ", coalescedWrites=" + c.coalescedWrites
                + ", coalescedSends=" + c.coalescedSends + ", creditStalls=" + c.creditStalls
                + ", creditStallNanos=" + c.creditStallNanos + ", ringsOffered=" + c.ringsOffered
                + ", ringsWithdrawn=" + c.ringsWithdrawn + ", copies=" + c.copies + ", zeroCopyBuffers="
                + c.zeroCopyBuffers + ", keepAliveProbes=" + c.keepAliveProbes + '}';
    }
}
