package io.netty.contrib.channel.rdma.internal.memory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The device refused to register a chunk. The message names the locked-memory limit, the usual cause, and how to
 * raise it.
 */
public final class MemoryRegistrationException extends RuntimeException {

    private static final long serialVersionUID = 1L;
    private static final Path PROC_LIMITS = Path.of("/proc/self/limits");

    MemoryRegistrationException(String message, Throwable cause) {
        super(message, cause);
    }

    static MemoryRegistrationException of(long size, long alreadyRegistered, Throwable cause) {
        return new MemoryRegistrationException(
                message(size, alreadyRegistered, lockedMemoryLimit(readProcLimits()), cause), cause);
    }

    /** A registration outside the allocator failed, e.g. a connection's receive ring ({@code what}). */
    public static MemoryRegistrationException of(String what, long size, Throwable cause) {
        return new MemoryRegistrationException(
                message(size, what, lockedMemoryLimit(readProcLimits()), cause), cause);
    }

    static String message(long size, long alreadyRegistered, String limit, Throwable cause) {
        return message(size, formatSize(alreadyRegistered) + " already registered by this allocator", limit, cause);
    }

    static String message(long size, String context, String limit, Throwable cause) {
        StringBuilder sb = new StringBuilder("memory registration of ").append(formatSize(size))
                .append(" failed (").append(context).append("): RLIMIT_MEMLOCK is ");
        if (limit == null) {
            sb.append("unknown; check it with ulimit -l");
        } else if ("unlimited".equals(limit)) {
            sb.append("unlimited, so the device or the kernel ran out of memory");
        } else {
            sb.append(formatSize(Long.parseLong(limit)))
              .append("; raise it with ulimit -l (systemd: LimitMEMLOCK=, Docker: --ulimit memlock=-1)");
        }
        String reason = cause == null ? null : cause.getMessage();
        if (reason != null) {
            sb.append(": ").append(reason);
        }
        return sb.toString();
    }

    /** The soft "Max locked memory" limit from {@code /proc/self/limits}: bytes, "unlimited" or null if unknown. */
    static String lockedMemoryLimit(String procLimits) {
        if (procLimits == null) {
            return null;
        }
        for (String line : procLimits.split("\n")) {
            if (line.startsWith("Max locked memory")) {
                String[] fields = line.substring("Max locked memory".length()).trim().split("\\s+");
                return fields.length > 0 && (fields[0].equals("unlimited") || fields[0].matches("\\d+"))
                        ? fields[0] : null;
            }
        }
        return null;
    }

    private static String readProcLimits() {
        try {
            return Files.readString(PROC_LIMITS);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    static String formatSize(long bytes) {
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
