package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.contrib.channel.rdma.internal.verbs.ResourceLimits;

/**
 * The device refused to register memory. The message names the locked-memory limit, what the process has pinned
 * against it, and how to raise it.
 */
public final class MemoryRegistrationException extends RuntimeException {

    private static final long serialVersionUID = 1L;
    private static final String FIX = "raise it with ulimit -l, LimitMEMLOCK= in the systemd unit, or --ulimit"
            + " memlock=-1 in docker (or grant CAP_IPC_LOCK)";

    MemoryRegistrationException(String message, Throwable cause) {
        super(message, cause);
    }

    static MemoryRegistrationException of(long size, long alreadyRegistered, Throwable cause) {
        return new MemoryRegistrationException(message(size, formatSize(alreadyRegistered)
                + " already registered by this allocator", PinnedMemory.snapshot(), cause), cause);
    }

    /** A registration outside the allocator failed, e.g. a connection's receive ring ({@code what}). */
    public static MemoryRegistrationException of(String what, long size, Throwable cause) {
        return new MemoryRegistrationException(message(size, what, PinnedMemory.snapshot(), cause), cause);
    }

    static String message(long size, String context, PinnedMemory.Snapshot pinned, Throwable cause) {
        StringBuilder sb = new StringBuilder("memory registration of ").append(formatSize(size))
                .append(" failed (").append(context).append("): ");
        if (pinned.capIpcLock()) {
            sb.append("RLIMIT_MEMLOCK does not apply (CAP_IPC_LOCK) and ").append(formatSize(pinned.pinned()))
              .append(" is pinned, so the device or the kernel ran out of memory");
        } else if (pinned.limit() == ResourceLimits.UNLIMITED) {
            sb.append("RLIMIT_MEMLOCK is unlimited and ").append(formatSize(pinned.pinned()))
              .append(" is pinned, so the device or the kernel ran out of memory");
        } else {
            sb.append("RLIMIT_MEMLOCK is ").append(formatSize(pinned.limit())).append(" and this process has ")
              .append(formatSize(pinned.pinned())).append(" pinned");
            if (pinned.kernelPinned() > 0 && pinned.kernelPinned() != pinned.registered()) {
                sb.append(" (").append(formatSize(pinned.registered())).append(" in memory regions, VmPin ")
                  .append(formatSize(pinned.kernelPinned())).append(')');
            }
            sb.append("; ").append(FIX);
        }
        String reason = cause == null ? null : cause.getMessage();
        if (reason != null) {
            sb.append(": ").append(reason);
        }
        return sb.toString();
    }

    public static String formatSize(long bytes) {
        if (bytes >= 1L << 30 && bytes % (1L << 30) == 0) {
            return (bytes >> 30) + " GiB";
        }
        if (bytes >= 1L << 20 && bytes % (1L << 20) == 0) {
            return (bytes >> 20) + " MiB";
        }
        if (bytes >= 1L << 10 && bytes % (1L << 10) == 0) {
            return (bytes >> 10) + " KiB";
        }
        return bytes + " B";
    }
}
