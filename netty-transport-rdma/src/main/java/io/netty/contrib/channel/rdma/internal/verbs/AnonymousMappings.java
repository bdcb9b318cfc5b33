package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Errno.CAPTURE;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * libc's {@code mmap} / {@code munmap} / {@code madvise} for anonymous private read-write mappings (registered
 * memory's pages), on ordinary or on 2 MiB huge pages.
 */
public final class AnonymousMappings {
    /** {@code madvise}: back the range with transparent huge pages where possible. */
    public static final int MADV_HUGEPAGE = 14;
    /** {@code madvise}: never back the range with transparent huge pages (even with THP {@code always}). */
    public static final int MADV_NOHUGEPAGE = 15;
    /** {@code madvise} (Linux 6.1+): collapse the range into transparent huge pages now, or fail saying so. */
    public static final int MADV_COLLAPSE = 25;

    private static final int PROT_READ = 1;
    private static final int PROT_WRITE = 2;
    private static final int MAP_PRIVATE = 2;
    private static final int MAP_ANONYMOUS = 0x20;
    private static final int MAP_HUGETLB = 0x40000;
    /** log2(2 MiB) in the MAP_HUGE_SHIFT (26) bits: the 2 MiB pool even where the default huge page differs. */
    private static final int MAP_HUGE_2MB = 21 << 26;
    private static final long MAP_FAILED = -1;

    private static final MethodHandle MMAP = Downcalls.LINKER.downcallHandle(
            Downcalls.LINKER.defaultLookup().find("mmap").orElseThrow(),
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG), CAPTURE);
    private static final MethodHandle MADVISE = Downcalls.LINKER.downcallHandle(
            Downcalls.LINKER.defaultLookup().find("madvise").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT), CAPTURE);
    private static final MethodHandle MUNMAP = Downcalls.LINKER.downcallHandle(
            Downcalls.LINKER.defaultLookup().find("munmap").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG), CAPTURE);

    private AnonymousMappings() {
    }

    /**
     * {@code length} bytes of new zeroed pages at an address the system chooses; their address.
     *
     * @throws OutOfMemoryError if the system refuses the mapping, naming errno
     */
    public static long map(long length) {
        long address = mmap(length, MAP_PRIVATE | MAP_ANONYMOUS);
        if (address < 0) {
            throw new OutOfMemoryError("mmap of " + length + " bytes failed: " + Errno.describe((int) -address));
        }
        return address;
    }

    /**
     * {@code length} bytes (a multiple of 2 MiB) on explicit 2 MiB huge pages of the kernel's hugetlb pool
     * ({@code MAP_HUGETLB}), reserved by the call: their address, or {@code -errno} when the pool cannot supply them
     * ({@code ENOMEM}: not enough free pages; {@code EINVAL}: no 2 MiB pool).
     */
    public static long mapHuge(long length) {
        return mmap(length, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB);
    }

    private static long mmap(long length, int flags) {
        try {
            MemorySegment state = Errno.state();
            long address = ((MemorySegment) MMAP.invokeExact(state, MemorySegment.NULL, length,
                    PROT_READ | PROT_WRITE, flags, -1, 0L)).address();
            return address == MAP_FAILED ? -Errno.get(state) : address;
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code madvise(address, length, advice)}: 0, or the errno it failed with. */
    public static int advise(long address, long length, int advice) {
        try {
            MemorySegment state = Errno.state();
            int rc = (int) MADVISE.invokeExact(state, MemorySegment.ofAddress(address), length, advice);
            return rc == 0 ? 0 : Errno.get(state);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /**
     * Gives back the pages of {@code [address, address + length)}; 0 bytes do nothing.
     *
     * @throws IllegalStateException if {@code munmap} fails: only wrong arguments make it fail, a bug
     */
    public static void unmap(long address, long length) {
        if (length == 0) {
            return;
        }
        int result;
        int errno;
        try {
            MemorySegment state = Errno.state();
            result = (int) MUNMAP.invokeExact(state, MemorySegment.ofAddress(address), length);
            errno = Errno.get(state);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (result != 0) {
            throw new IllegalStateException("munmap(0x" + Long.toHexString(address) + ", " + length + ") failed: "
                    + Errno.describe(errno));
        }
    }
}
