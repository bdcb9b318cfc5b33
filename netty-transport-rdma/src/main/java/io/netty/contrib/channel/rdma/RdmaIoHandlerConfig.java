package io.netty.contrib.channel.rdma;

import static io.netty.util.internal.ObjectUtil.checkInRange;
import static io.netty.util.internal.ObjectUtil.checkPositiveOrZero;

/**
 * How an {@link RdmaIoHandler} waits for work.
 *
 * <p>By default (adaptive) the loop busy-polls its completion queue for {@link #spinNanos()} after the last
 * work, backing off with {@link Thread#onSpinWait()} and {@link Thread#yield()} so co-located loops still make
 * progress; then it arms the completion queue and blocks in {@code epoll_wait} until a completion, an rdma_cm
 * event, a task or a timer. {@link #spinning()} never blocks: the lowest latency, one core per loop.
 */
public final class RdmaIoHandlerConfig {
    static final long DEFAULT_SPIN_NANOS = 50_000;
    static final int DEFAULT_COMPLETION_QUEUE_SIZE = 32768;
    static final int DEFAULT_POLL_BATCH = 64;

    private long spinNanos = DEFAULT_SPIN_NANOS;
    private boolean pureSpin;
    private int completionQueueSize = DEFAULT_COMPLETION_QUEUE_SIZE;
    private int pollBatch = DEFAULT_POLL_BATCH;

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
     * Entries of the loop's completion queue, shared by all its connections: each takes its send queue depth
     * plus its receive buffer count, and a connection that would overrun the queue is refused. Default 32768,
     * or the device's {@code max_cqe} if that is smaller (the kernel's rxe offers 32767).
     */
    public RdmaIoHandlerConfig completionQueueSize(int completionQueueSize) {
        this.completionQueueSize = checkInRange(completionQueueSize, 64, 1 << 22, "completionQueueSize");
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

    RdmaIoHandlerConfig copy() {
        RdmaIoHandlerConfig copy = new RdmaIoHandlerConfig();
        copy.spinNanos = spinNanos;
        copy.pureSpin = pureSpin;
        copy.completionQueueSize = completionQueueSize;
        copy.pollBatch = pollBatch;
        return copy;
    }
}
