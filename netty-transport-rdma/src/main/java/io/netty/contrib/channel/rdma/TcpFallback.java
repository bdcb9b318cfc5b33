package io.netty.contrib.channel.rdma;

import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.net.InetSocketAddress;
import java.util.concurrent.ConcurrentHashMap;

/**
 * When a client {@link RdmaChannel} falls back to TCP ({@link RdmaChannelOption#TCP_FALLBACK}), and what it
 * remembers: a destination that could not be reached over RDMA is reached over TCP, without a new RDMA attempt,
 * until its decision expires ({@link RdmaChannelOption#TCP_FALLBACK_MEMORY_MILLIS}); the reason is logged once per
 * decision, not per connection. Decisions are the process's, shared by every loop; any thread.
 */
final class TcpFallback {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(TcpFallback.class);
    /** Decisions beyond this many are not remembered: each new destination then tries RDMA again. */
    private static final int MAX_REMEMBERED = 4096;
    private static final ConcurrentHashMap<InetSocketAddress, Decision> DECISIONS = new ConcurrentHashMap<>();

    private TcpFallback() {
    }

    private record Decision(String reason, long expiresAtNanos) {
    }

    /**
     * Why a connection to {@code destination} goes over TCP without an RDMA attempt: a remembered decision, or
     * null if RDMA should be tried.
     */
    static String remembered(InetSocketAddress destination) {
        Decision d = DECISIONS.get(destination);
        if (d == null) {
            return null;
        }
        if (System.nanoTime() - d.expiresAtNanos >= 0) {
            DECISIONS.remove(destination, d);
            return null;
        }
        return d.reason;
    }

    /**
     * Remembers that {@code destination} could not be reached over RDMA, for {@code memoryMillis} (0: not at all),
     * and logs it unless a live decision said so already.
     */
    static void remember(InetSocketAddress destination, String reason, int memoryMillis) {
        if (memoryMillis > 0 && DECISIONS.size() < MAX_REMEMBERED) {
            Decision d = new Decision(reason, System.nanoTime() + memoryMillis * 1_000_000L);
            Decision before = DECISIONS.put(destination, d);
            if (before != null && System.nanoTime() - before.expiresAtNanos < 0) {
                return;
            }
            logger.info("{} is reached over TCP instead of RDMA for the next {} ms: {}", destination, memoryMillis,
                    reason);
        } else {
            logger.info("{} is reached over TCP instead of RDMA: {}", destination, reason);
        }
    }

    /** Forgets every decision (tests). */
    static void forgetAll() {
        DECISIONS.clear();
    }

    /**
     * Why this JVM cannot make TCP paths (Netty's epoll channels carry them), or null if it can. Loads nothing
     * from the epoll classes when they are absent.
     */
    static String tcpUnavailability() {
        if (!FdWatcher.epollClassesPresent()) {
            return "netty-transport-classes-epoll is not on the class path (add netty-transport-native-epoll)";
        }
        return TcpPath.unavailability();
    }
}
