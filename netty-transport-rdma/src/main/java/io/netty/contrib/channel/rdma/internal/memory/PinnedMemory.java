package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.contrib.channel.rdma.internal.verbs.MemoryRegion;
import io.netty.contrib.channel.rdma.internal.verbs.ResourceLimits;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The memory this process has pinned by registration against {@code RLIMIT_MEMLOCK}, the limit the kernel enforces
 * on {@code ibv_reg_mr} (its {@code ib_umem_get} adds every page a region spans to the process's {@code pinned_vm},
 * shown as {@code VmPin} in {@code /proc/self/status}, and refuses with {@code ENOMEM} past the limit unless the
 * process has {@code CAP_IPC_LOCK}). Uses no Netty class: {@code diagnose} reads it alone.
 */
public final class PinnedMemory {
    private static final int CAP_IPC_LOCK = 14;
    private static final Path STATUS = Path.of("/proc/self/status");

    private PinnedMemory() {
    }

    /** A look at the process: what it pinned through the verbs, what the kernel counts, and the limit. */
    public record Snapshot(long registered, long kernelPinned, long limit, boolean capIpcLock) {

        /** The larger of {@link #registered} and {@link #kernelPinned}: what counts against the limit. */
        public long pinned() {
            return Math.max(registered, kernelPinned);
        }

        /** Whether the kernel enforces a limit on this process: a finite soft limit and no CAP_IPC_LOCK. */
        public boolean limited() {
            return limit != ResourceLimits.UNLIMITED && !capIpcLock;
        }

        /** {@link #pinned()} as a fraction of {@link #limit}; 0 when {@linkplain #limited() unlimited}. */
        public double usedFraction() {
            return limited() ? limit == 0 ? 1 : (double) pinned() / limit : 0;
        }

        @Override
        public String toString() {
            return MemoryRegistrationException.formatSize(pinned()) + " pinned ("
                    + MemoryRegistrationException.formatSize(registered) + " in memory regions"
                    + (kernelPinned > 0 ? ", VmPin " + MemoryRegistrationException.formatSize(kernelPinned) : "")
                    + ") of RLIMIT_MEMLOCK " + (limit == ResourceLimits.UNLIMITED ? "unlimited"
                    : MemoryRegistrationException.formatSize(limit))
                    + (capIpcLock ? " (CAP_IPC_LOCK: the limit does not apply)" : "");
        }
    }

    /** Bytes the process's live memory regions pin (their pages), on any device. */
    public static long registered() {
        return MemoryRegion.pinnedBytes();
    }

    /** The soft {@code RLIMIT_MEMLOCK} in bytes, or {@code -1} if unlimited. */
    public static long limit() {
        return ResourceLimits.lockedMemorySoft();
    }

    /** Reads {@code /proc/self/status} (VmPin, CapEff) and the limit now. */
    public static Snapshot snapshot() {
        String status;
        try {
            status = Files.readString(STATUS);
        } catch (IOException | RuntimeException e) {
            status = "";
        }
        return snapshot(registered(), status, limit());
    }

    static Snapshot snapshot(long registered, String status, long limit) {
        long vmPin = 0;
        boolean capIpcLock = false;
        for (String line : status.split("\n")) {
            if (line.startsWith("VmPin:")) {
                String[] f = line.substring(6).trim().split("\\s+");
                vmPin = Long.parseLong(f[0]) * 1024;
            } else if (line.startsWith("CapEff:")) {
                capIpcLock = (Long.parseUnsignedLong(line.substring(7).trim(), 16) & (1L << CAP_IPC_LOCK)) != 0;
            }
        }
        return new Snapshot(registered, vmPin, limit, capIpcLock);
    }
}
