package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.memory.PinnedMemory;

/**
 * What an RDMA event loop has done so far ({@link RdmaIoHandler#metric(java.util.concurrent.Executor)}): live
 * counters kept by the loop thread with plain increments, so they cost nothing when nobody reads them; read from
 * another thread, a value may lag behind the loop slightly.
 */
public final class RdmaIoHandlerMetric {
    final RdmaIoHandler handler;

    RdmaIoHandlerMetric(RdmaIoHandler handler) {
        this.handler = handler;
    }

    /** Looks at the loop's completion queues (one {@code ibv_poll_cq} per queue, more while batches come full). */
    public long polls() {
        return handler.polls;
    }

    /** Looks that found nothing: a busy-polling loop makes mostly these. */
    public long emptyPolls() {
        return handler.emptyPolls;
    }

    /** Work completions taken (sends, receives, ring writes, window binds). */
    public long completions() {
        return handler.completionCount;
    }

    /** Times the loop blocked in {@code epoll_wait} after its spin found nothing. */
    public long sleeps() {
        return handler.blocks;
    }

    /**
     * Connects of the loop's clients that went over TCP instead of RDMA ({@link RdmaChannelOption#TCP_FALLBACK}):
     * after an RDMA attempt failed, or at once for a remembered destination or a loop without RDMA.
     */
    public long tcpFallbacks() {
        return handler.tcpFallbacks;
    }

    /** Times another thread had to wake the blocked loop (a task submitted to it). */
    public long wakeups() {
        return handler.wakeups.get();
    }

    /** Completion queue and shared receive queue pairs the loop holds (one per device and slot size, more past
     * a device's {@code max_cqe}). */
    public int queueGroups() {
        return handler.queueGroupCount;
    }

    /** Queue pairs (connections) on the loop's completion queues now. */
    public int queuePairs() {
        return handler.queuePairCount;
    }

    /**
     * rdma_cm ids of connections closed while a port of their device was down, kept until it is active again (no
     * CM message is sent while it is down; docs/ARCHITECTURE.md).
     */
    public int heldConnectionIds() {
        return handler.parkedIdCount;
    }

    /** Entries of the loop's completion queues together (they grow as connections join). */
    public long completionQueueEntries() {
        return handler.cqEntries;
    }

    /**
     * Completion queue entries that could be filled at once: every receive the shared receive queues hold and
     * every connection's send queue. Never more than {@link #completionQueueEntries()}: a connection that would
     * need more makes the queue grow, or goes to a new queue group.
     */
    public long completionQueueReserved() {
        return handler.cqReserved;
    }

    /** Receive credits granted to the loop's peers together: receives they may have in flight at once. */
    public long receiveCreditsGranted() {
        return handler.creditsGranted;
    }

    /** Bytes of receive slots the loop's queue groups hold from the registered pool (they shrink after a flood). */
    public long receiveSlotMemory() {
        return handler.receiveSlotMemory;
    }

    /**
     * Bytes of receive rings the loop's connections have now (offered, retired, or kept by buffers the application
     * holds): at most {@link RdmaIoHandlerConfig#ringMemory()}.
     */
    public long ringMemory() {
        return handler.ringMemory().pinned();
    }

    /**
     * Bytes registered for the loop's receive rings: its arenas' blocks (one is kept when empty) and the rings of
     * their own (PD-wide rkeys). At most {@link RdmaIoHandlerConfig#ringMemory()} but for a first block above a
     * smaller limit.
     */
    public long ringMemoryRegistered() {
        return handler.ringMemory().registered();
    }

    /**
     * Bytes this process has pinned by registering memory, on every device and by every loop (the same for every
     * loop): the pages its memory regions span, or the kernel's {@code VmPin} where that is more (drivers that pin
     * queue buffers too). What {@code RLIMIT_MEMLOCK} bounds: {@link #pinnedMemoryLimit()}. Reads
     * {@code /proc/self/status}: for metrics scrapes, not for the data path.
     */
    public long pinnedMemory() {
        return PinnedMemory.snapshot().pinned();
    }

    /**
     * The soft {@code RLIMIT_MEMLOCK} in bytes, which registrations fail past ({@code ENOMEM}); -1 when no limit
     * applies (unlimited, or the process has {@code CAP_IPC_LOCK}). A warning is logged when
     * {@link #pinnedMemory()} passes 80 % of it.
     */
    public long pinnedMemoryLimit() {
        PinnedMemory.Snapshot s = PinnedMemory.snapshot();
        return s.limited() ? s.limit() : -1;
    }

    @Override
    public String toString() {
        return "RdmaIoHandlerMetric{polls=" + polls() + ", emptyPolls=" + emptyPolls() + ", completions="
                + completions() + ", sleeps=" + sleeps() + ", wakeups=" + wakeups() + ", queueGroups="
                + queueGroups() + ", queuePairs=" + queuePairs() + ", heldConnectionIds=" + heldConnectionIds()
                + ", completionQueueEntries="
                + completionQueueEntries() + ", completionQueueReserved=" + completionQueueReserved()
                + ", receiveCreditsGranted=" + receiveCreditsGranted() + ", ringMemory=" + ringMemory()
                + ", ringMemoryRegistered=" + ringMemoryRegistered()
                + ", pinnedMemory=" + pinnedMemory() + ", pinnedMemoryLimit=" + pinnedMemoryLimit() + '}';
    }
}
