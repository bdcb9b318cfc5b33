package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.util.internal.SystemPropertyUtil;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.util.concurrent.TimeUnit;

/**
 * Warns when the memory this process has pinned passes a share of {@code RLIMIT_MEMLOCK}
 * ({@code -Dio.netty.contrib.rdma.pinnedWarningPercent}, default 80): once per crossing (it warns again only after
 * pinned memory fell back below the threshold), and at most once per interval
 * ({@code -Dio.netty.contrib.rdma.pinnedWarningIntervalMillis}, default 60 000), so a pool that grows and shrinks
 * around the line logs one line a minute at most. Near the limit registrations fail, and the warning says so first.
 * Looked at after each registration (chunks, receive rings), never on the data path.
 */
public final class PinnedMemoryWatch {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(PinnedMemoryWatch.class);
    static final int THRESHOLD_PERCENT = SystemPropertyUtil.getInt("io.netty.contrib.rdma.pinnedWarningPercent", 80);
    private static final long INTERVAL_NANOS = TimeUnit.MILLISECONDS.toNanos(
            SystemPropertyUtil.getLong("io.netty.contrib.rdma.pinnedWarningIntervalMillis", 60_000));
    private static final PinnedMemoryWatch PROCESS = new PinnedMemoryWatch(THRESHOLD_PERCENT, INTERVAL_NANOS);

    private final int thresholdPercent;
    private final long intervalNanos;
    // Guarded by this.
    private boolean above;
    private boolean warned;
    private long lastWarningNanos;

    PinnedMemoryWatch(int thresholdPercent, long intervalNanos) {
        this.thresholdPercent = thresholdPercent;
        this.intervalNanos = intervalNanos;
    }

    /** After a registration: warns if it took the process past the threshold. */
    public static void registered() {
        if (thresholdPercent() > 0) {
            PinnedMemory.Snapshot s = PinnedMemory.snapshot();
            String warning = PROCESS.check(s, System.nanoTime());
            if (warning != null) {
                logger.warn(warning);
            }
        }
    }

    static int thresholdPercent() {
        return THRESHOLD_PERCENT;
    }

    /** The warning to log for {@code s} now, or null. */
    synchronized String check(PinnedMemory.Snapshot s, long nowNanos) {
        boolean nowAbove = s.limited() && s.usedFraction() * 100 >= thresholdPercent;
        boolean crossed = nowAbove && !above;
        above = nowAbove;
        if (!crossed || warned && nowNanos - lastWarningNanos < intervalNanos) {
            return null;
        }
        warned = true;
        lastWarningNanos = nowNanos;
        return "RDMA registrations have pinned " + Math.round(s.usedFraction() * 100) + " % of RLIMIT_MEMLOCK: " + s
                + "; past the limit registrations fail (ENOMEM): raise it with ulimit -l, LimitMEMLOCK= in the"
                + " systemd unit, or --ulimit memlock=-1 in docker";
    }
}
