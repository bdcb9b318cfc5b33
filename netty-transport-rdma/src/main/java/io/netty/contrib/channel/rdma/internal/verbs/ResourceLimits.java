package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/** libc's {@code getrlimit} for {@code RLIMIT_MEMLOCK}: what the kernel lets this process pin. */
public final class ResourceLimits {
    private static final int RLIMIT_MEMLOCK = 8;
    /** {@code RLIM_INFINITY}: all ones. */
    public static final long UNLIMITED = -1;

    private static final MethodHandle GETRLIMIT = Downcalls.LINKER.downcallHandle(
            Downcalls.LINKER.defaultLookup().find("getrlimit").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));

    private ResourceLimits() {
    }

    /** The soft {@code RLIMIT_MEMLOCK} in bytes (what {@code ulimit -l} shows, times 1024), or {@link #UNLIMITED}. */
    public static long lockedMemorySoft() {
        return lockedMemory(0);
    }

    /** The hard {@code RLIMIT_MEMLOCK} in bytes, or {@link #UNLIMITED}. */
    public static long lockedMemoryHard() {
        return lockedMemory(8);
    }

    private static long lockedMemory(long offset) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment rlimit = arena.allocate(16, 8);
            int rc = (int) GETRLIMIT.invokeExact(RLIMIT_MEMLOCK, rlimit);
            if (rc != 0) {
                throw new IllegalStateException("getrlimit(RLIMIT_MEMLOCK) failed");
            }
            return rlimit.get(JAVA_LONG, offset);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }
}
