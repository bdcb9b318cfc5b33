package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Errno.CAPTURE;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/** libc's {@code mmap} / {@code munmap} for anonymous private read-write mappings (registered memory's pages). */
public final class AnonymousMappings {
    private static final int PROT_READ = 1;
    private static final int PROT_WRITE = 2;
    private static final int MAP_PRIVATE = 2;
    private static final int MAP_ANONYMOUS = 0x20;
    private static final long MAP_FAILED = -1;

    private static final MethodHandle MMAP = Downcalls.LINKER.downcallHandle(
            Downcalls.LINKER.defaultLookup().find("mmap").orElseThrow(),
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG), CAPTURE);
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
        long address;
        try {
            MemorySegment state = Errno.state();
            address = ((MemorySegment) MMAP.invokeExact(state, MemorySegment.NULL, length, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L)).address();
            if (address == MAP_FAILED) {
                throw new OutOfMemoryError("mmap of " + length + " bytes failed: "
                        + Errno.describe(Errno.get(state)));
            }
        } catch (OutOfMemoryError e) {
            throw e;
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        return address;
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
