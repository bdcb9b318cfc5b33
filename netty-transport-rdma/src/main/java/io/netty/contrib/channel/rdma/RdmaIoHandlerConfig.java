package io.netty.contrib.channel.rdma;

import io.netty.util.internal.ObjectUtil;

import static io.netty.util.internal.ObjectUtil.checkInRange;
import static io.netty.util.internal.ObjectUtil.checkPositiveOrZero;

/**
 * How an {@link RdmaIoHandler} waits for work.
 *
 * <p>By default (adaptive) the loop keeps polling its completion queues for up to {@link #spinNanos()} after the
 * last work it found: each completion, rdma_cm event or task starts the spin again, so under continuous traffic
 * (events less than {@code spinNanos} apart, such as an echo) it never blocks and behaves like busy-polling. While
 * it spins it calls {@link Thread#onSpinWait()}, then {@link Thread#yield()} so co-located loops still make
 * progress. The spin follows how soon spins pay: about eight times their running average, so an echo answered in
 * 3 µs spins some 25 µs after its last message. It shrinks when spinning does not pay: after four spins in a row
 * that either ended in a block whose work came later than a full spin would have waited, or lost the core to other
 * threads meanwhile (the machine has more busy threads than cores, and spinning would take the core the peer or the
 * JIT compiler needs), it is halved, down to 1 µs; at 1 µs the full spin is tried again now and then. A
 * scheduled task that falls due ends the spin (the event loop runs it, then the loop spins again); a task submitted
 * from another thread ends it too. After a spin without work it arms the completion queues and blocks in
 * {@code epoll_wait} until a completion, an rdma_cm event, a task or the next timer: an idle loop uses no CPU.
 * {@link #spinning()} never blocks: the lowest latency, one core per loop.
 */
public final class RdmaIoHandlerConfig {
    static final long DEFAULT_SPIN_NANOS = 50_000;
    static final int DEFAULT_COMPLETION_QUEUE_SIZE = 1 << 20;
    static final int DEFAULT_SHARED_RECEIVE_QUEUE_SIZE = 8192;
    static final int DEFAULT_POLL_BATCH = 64;
    static final long DEFAULT_RING_MEMORY = 64L << 20;
    static final long DEFAULT_MEMORY_RELEASE_DELAY_MILLIS = 5000;
    static final long DEFAULT_SEND_STALL_TIMEOUT_MILLIS = 30_000;

    private long spinNanos = DEFAULT_SPIN_NANOS;
    private boolean pureSpin;
    private boolean requireRdma = true;
    private int completionQueueSize = DEFAULT_COMPLETION_QUEUE_SIZE;
    private int pollBatch = DEFAULT_POLL_BATCH;
    private int sharedReceiveQueueSize = DEFAULT_SHARED_RECEIVE_QUEUE_SIZE;
    private long ringMemory = DEFAULT_RING_MEMORY;
    private long memoryReleaseDelayMillis = DEFAULT_MEMORY_RELEASE_DELAY_MILLIS;
    private long sendStallTimeoutMillis = DEFAULT_SEND_STALL_TIMEOUT_MILLIS;
    private HugePages hugePages = HugePages.AUTO;

    /**
     * The pages behind the registered pool's chunks ({@link RdmaByteBufAllocator}). Huge pages cut the device's
     * address translations (1 GiB registered is 262 144 entries in 4 KiB pages, 512 in 2 MiB pages) and the page
     * faults of touching a chunk. The page size obtained is in {@link RdmaByteBufAllocator.Metric#pageSize()} and in
     * {@link Rdma#diagnose(String)}.
     */
    public enum HugePages {
        /**
         * Explicit 2 MiB pages while the kernel's hugetlb pool has free ones ({@code vm.nr_hugepages}), else
         * transparent huge pages where THP is {@code madvise} or {@code always}, else 4 KiB pages: the best the
         * system offers, never an error.
         */
        AUTO,
        /**
         * Transparent huge pages only, else 4 KiB pages: leaves a reserved hugetlb pool to the programs it was
         * reserved for.
         */
        TRANSPARENT,
        /**
         * Explicit 2 MiB pages required: a chunk the hugetlb pool cannot supply fails with an exception that says
         * how many pages are free and how to reserve more. Buffers above the pooled maximum are rounded to 2 MiB.
         */
        EXPLICIT,
        /** 4 KiB pages, also where THP is {@code always} ({@code MADV_NOHUGEPAGE}). */
        OFF
    }

    /** A config that busy-polls forever and never blocks. */
    public static RdmaIoHandlerConfig spinning() {
        RdmaIoHandlerConfig config = new RdmaIoHandlerConfig();
        config.pureSpin = true;
        return config;
    }

    public long spinNanos() {
        return spinNanos;
    }

    /** Nanoseconds to keep polling after the last work before blocking; 0 blocks at once. Default 50 µs. */
    public RdmaIoHandlerConfig spinNanos(long spinNanos) {
        this.spinNanos = checkPositiveOrZero(spinNanos, "spinNanos");
        return this;
    }

    public boolean pureSpin() {
        return pureSpin;
    }

    public int completionQueueSize() {
        return completionQueueSize;
    }

    /**
     * The most entries one of the loop's completion queues grows to. A completion queue has room for every
     * receive its shared receive queue holds and the send queue of each connection on it, and grows
     * ({@code ibv_resize_cq}) as connections join; when it cannot grow any more (this limit, or the device's
     * {@code max_cqe}: the kernel's rxe offers 32767), the loop opens another completion queue and shared receive
     * queue. Default 1048576.
     */
    public RdmaIoHandlerConfig completionQueueSize(int completionQueueSize) {
        this.completionQueueSize = checkInRange(completionQueueSize, 64, 1 << 22, "completionQueueSize");
        return this;
    }

    public int sharedReceiveQueueSize() {
        return sharedReceiveQueueSize;
    }

    /**
     * Receive buffers one shared receive queue of the loop holds at most, or the device's {@code max_srq_wr} if
     * that is smaller: the receive credits all peers on it hold together, and 16 receives posted ahead of them
     * (so that replacing a freed buffer waits until the loop's sends are out). Buffers are posted as credits are
     * granted, not up front. Default 8192.
     */
    public RdmaIoHandlerConfig sharedReceiveQueueSize(int sharedReceiveQueueSize) {
        this.sharedReceiveQueueSize = checkInRange(sharedReceiveQueueSize, 64, 1 << 22, "sharedReceiveQueueSize");
        return this;
    }

    public int pollBatch() {
        return pollBatch;
    }

    /** Work completions taken by one {@code ibv_poll_cq}. Default 64. */
    public RdmaIoHandlerConfig pollBatch(int pollBatch) {
        this.pollBatch = checkInRange(pollBatch, 1, 4096, "pollBatch");
        return this;
    }

    public long ringMemory() {
        return ringMemory;
    }

    /**
     * The most memory the receive rings of the loop's connections take together (carved from blocks registered for
     * their peers' ring writes), however many connections stream at once: what the loop's peers can make it pin
     * through rings. Blocks are registered as rings are asked for, and only while they leave half of what
     * {@code RLIMIT_MEMLOCK} allows unpinned (where it applies). Rings share it fairly: a new ring gets at most a
     * quarter of this memory over the number of connections that have or want a ring (a power of two; all of it
     * for a single connection; at least 64 KiB while the whole memory has that much for each), and at most the
     * {@link RdmaChannelOption#RING_SIZE}; a ring more than twice its share while others wait for one, or above its
     * share while the rings take more than a quarter of this memory, is withdrawn and offered again at its share (the
     * rings that take writes at once are the receive side's working set in the caches); a connection for which less
     * than 64 KiB (or eight receive slots) would be left gets none until rings are given back (idle rings are
     * withdrawn after a second): its large messages go on as SENDs. 0 offers no rings. Default 64 MiB: whole rings
     * of the default size for up to four streaming connections, 2 MiB each for eight, 64 KiB each for 500
     * connections streaming at once. Closed connections keep their ring until their last sends completed or their
     * peer disconnected (at most ten seconds), so a loop whose connections come and go quickly holds some of it for
     * them.
     */
    public RdmaIoHandlerConfig ringMemory(long ringMemory) {
        this.ringMemory = checkPositiveOrZero(ringMemory, "ringMemory");
        return this;
    }

    public long memoryReleaseDelayMillis() {
        return memoryReleaseDelayMillis;
    }

    /**
     * How long a queue group of the loop waits after a connection left it, with no connection joining or leaving
     * meanwhile, before it gives memory back: the receive slots no credit needs any more (in blocks of 64), its
     * shared receive queue and the growth of its completion queue once no connection is left, and what the loop
     * thread caches of the registered pool. So after a flood of connections the pool shrinks back to what the
     * remaining connections use plus the allocator's {@code maxEmptyChunks}. Releasing waits that long so that
     * connections coming and going do not map, register and free memory each time. Default 5000 (5 s).
     */
    public RdmaIoHandlerConfig memoryReleaseDelayMillis(long memoryReleaseDelayMillis) {
        this.memoryReleaseDelayMillis = checkPositiveOrZero(memoryReleaseDelayMillis, "memoryReleaseDelayMillis");
        return this;
    }

    public long sendStallTimeoutMillis() {
        return sendStallTimeoutMillis;
    }

    /**
     * How long a connection's device may owe it a send completion and give none before the channel closes with a
     * cause that says so. A live connection's completions come within its retry budget (4.096 µs × 2^ack timeout ×
     * (retry count + 1)); they stop for good when the peer answers with RNR NAKs without end ({@code rnr_retry} 7
     * retries forever by the specification) or when a path is retried without end (kernel rxe treats
     * {@code retry_cnt} 7 so): without this bound such a channel would stay open with its writes pending forever.
     * Checked about every quarter of it, at most a second apart (the same check sends the keepalive probes of
     * {@link RdmaChannelOption#KEEPALIVE_IDLE_MILLIS}); the silence is timed from the check that first saw it, so
     * the channel closes up to two checks after the limit, never before it. 0 never closes for it. Default 30000
     * (30 s).
     */
    public RdmaIoHandlerConfig sendStallTimeoutMillis(long sendStallTimeoutMillis) {
        this.sendStallTimeoutMillis = checkPositiveOrZero(sendStallTimeoutMillis, "sendStallTimeoutMillis");
        return this;
    }

    /**
     * Whether a loop needs RDMA to start. True, the default: {@link RdmaIoHandler#newFactory(RdmaIoHandlerConfig)}
     * throws where RDMA is unavailable ({@link Rdma#unavailabilityCause()}). False: on such a host the loops start
     * without it, for code that runs unchanged on hosts with and without RDMA — their clients with
     * {@link RdmaChannelOption#TCP_FALLBACK} connect over TCP at once, their servers with
     * {@link RdmaChannelOption#TCP_LISTEN} listen on TCP only, anything else fails with the reason; Netty's epoll
     * channels run on them as on any RDMA loop. Where RDMA is available this changes nothing.
     */
    public RdmaIoHandlerConfig requireRdma(boolean requireRdma) {
        this.requireRdma = requireRdma;
        return this;
    }

    boolean requireRdma() {
        return requireRdma;
    }

    public HugePages hugePages() {
        return hugePages;
    }

    /**
     * The pages behind the registered pool ({@link HugePages}). Default {@link HugePages#AUTO}. The pool is one per
     * device and process, shared by every loop: it takes the setting of the first loop created while none exists
     * (after every RDMA loop has stopped, the next one chooses again); a loop created later with another setting
     * logs which one is in effect.
     */
    public RdmaIoHandlerConfig hugePages(HugePages hugePages) {
        this.hugePages = ObjectUtil.checkNotNull(hugePages, "hugePages");
        return this;
    }

    RdmaIoHandlerConfig copy() {
        RdmaIoHandlerConfig copy = new RdmaIoHandlerConfig();
        copy.requireRdma = requireRdma;
        copy.spinNanos = spinNanos;
        copy.pureSpin = pureSpin;
        copy.completionQueueSize = completionQueueSize;
        copy.pollBatch = pollBatch;
        copy.sharedReceiveQueueSize = sharedReceiveQueueSize;
        copy.ringMemory = ringMemory;
        copy.memoryReleaseDelayMillis = memoryReleaseDelayMillis;
        copy.sendStallTimeoutMillis = sendStallTimeoutMillis;
        copy.hugePages = hugePages;
        return copy;
    }
}
