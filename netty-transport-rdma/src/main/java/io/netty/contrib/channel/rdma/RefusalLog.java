package io.netty.contrib.channel.rdma;

import io.netty.util.internal.SystemPropertyUtil;
import io.netty.util.internal.logging.InternalLogger;

import java.util.concurrent.TimeUnit;

/**
 * Logs refusals (connection requests rejected, peers that broke the protocol) at most once per interval
 * ({@code -Dio.netty.contrib.rdma.refusalLogIntervalMillis}, default 10 000; 0 logs every one), with how many were
 * not logged since: a peer cannot flood the log by connecting badly. Loop-thread confined.
 */
final class RefusalLog {
    private static final long DEFAULT_INTERVAL_NANOS = TimeUnit.MILLISECONDS.toNanos(
            SystemPropertyUtil.getLong("io.netty.contrib.rdma.refusalLogIntervalMillis", 10_000));

    private final InternalLogger logger;
    private final long intervalNanos;
    private long lastNanos;
    private boolean logged;
    private int suppressed;

    RefusalLog(InternalLogger logger) {
        this(logger, DEFAULT_INTERVAL_NANOS);
    }

    RefusalLog(InternalLogger logger, long intervalNanos) {
        this.logger = logger;
        this.intervalNanos = intervalNanos;
    }

    /** One refusal: logged as a warning with {@code message} unless one was logged in the last 10 s. */
    void refused(String message) {
        long now = System.nanoTime();
        if (logged && now - lastNanos < intervalNanos) {
            suppressed++;
            return;
        }
        if (suppressed > 0) {
            logger.warn("{} ({} more refused since the last report, not logged)", message, suppressed);
        } else {
            logger.warn(message);
        }
        logged = true;
        lastNanos = now;
        suppressed = 0;
    }
}
