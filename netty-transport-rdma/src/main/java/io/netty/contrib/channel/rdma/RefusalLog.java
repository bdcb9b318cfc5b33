package io.netty.contrib.channel.rdma;

import io.netty.util.concurrent.GlobalEventExecutor;
import io.netty.util.internal.SystemPropertyUtil;
import io.netty.util.internal.logging.InternalLogger;

import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Logs what peers can make a server do per connection (requests refused, handshakes that time out or fail) at
 * most once per interval and kind ({@code -Dio.netty.contrib.rdma.refusalLogIntervalMillis}, default 10 000; 0
 * logs every one): the first of a kind is logged, those after it within the interval are counted, and one line at
 * the end of the interval says how many. A peer cannot flood the log by connecting badly. Each line is one line:
 * the cause's stack trace is logged only while debug logging is on (then every event is, at debug level). Any
 * thread: the children of one server log through it from their own loops.
 */
final class RefusalLog {
    private static final long DEFAULT_INTERVAL_NANOS = TimeUnit.MILLISECONDS.toNanos(
            SystemPropertyUtil.getLong("io.netty.contrib.rdma.refusalLogIntervalMillis", 10_000));

    /** What happened, as the count line names it. */
    enum Kind {
        REFUSED("connection requests refused"),
        TIMED_OUT("handshakes not established in time"),
        ACCEPT_FAILED("accepts failed"),
        FAILED("connections failed before they were established"),
        QUEUE_PAIR_FAILED("queue pairs the device put in error"),
        RING_FAILED("receive rings not registered");

        final String counted;

        Kind(String counted) {
            this.counted = counted;
        }
    }

    private final InternalLogger logger;
    private final Object owner;
    private final long intervalNanos;
    /** Runs the count line of an interval; not the caller's loop, which may be gone by then. */
    private final ScheduledExecutorService scheduler;
    private final long[] lastNanos = new long[Kind.values().length];
    private final boolean[] logged = new boolean[Kind.values().length];
    private final int[] suppressed = new int[Kind.values().length];

    /** {@code owner} starts every line (the server channel). */
    RefusalLog(InternalLogger logger, Object owner) {
        this(logger, owner, DEFAULT_INTERVAL_NANOS, GlobalEventExecutor.INSTANCE);
    }

    RefusalLog(InternalLogger logger, Object owner, long intervalNanos, ScheduledExecutorService scheduler) {
        this.logger = logger;
        this.owner = owner;
        this.intervalNanos = intervalNanos;
        this.scheduler = scheduler;
    }

    /** One event of {@code kind}: a warning with {@code message} unless one of its kind was logged in the interval. */
    synchronized void log(Kind kind, String message, Throwable cause) {
        int k = kind.ordinal();
        long now = System.nanoTime();
        if (logged[k] && now - lastNanos[k] < intervalNanos) {
            if (suppressed[k]++ == 0) {
                scheduler.schedule(() -> report(kind), lastNanos[k] + intervalNanos - now, TimeUnit.NANOSECONDS);
            }
            if (logger.isDebugEnabled()) {
                logger.debug(owner + ": " + message, cause);
            }
            return;
        }
        if (cause != null && logger.isDebugEnabled()) {
            logger.warn(owner + ": " + message, cause);
        } else {
            logger.warn(owner + ": " + message);
        }
        logged[k] = true;
        lastNanos[k] = now;
    }

    /** The end of an interval in which events of {@code kind} were counted: one line with their count. */
    private synchronized void report(Kind kind) {
        int k = kind.ordinal();
        int n = suppressed[k];
        suppressed[k] = 0;
        // A new interval starts: a flood that goes on is one count line per interval.
        lastNanos[k] = System.nanoTime();
        logger.warn("{}: {}: {} more in the last {} ms (not logged one by one)", owner, kind.counted, n,
                TimeUnit.NANOSECONDS.toMillis(intervalNanos));
    }
}
