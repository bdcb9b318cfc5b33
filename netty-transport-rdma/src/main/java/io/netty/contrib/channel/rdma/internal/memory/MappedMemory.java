package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.contrib.channel.rdma.internal.verbs.Errno;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Anonymous private mappings of their own ({@code mmap}/{@code munmap}) for the memory of {@link Chunk}s.
 *
 * <p>Not {@code malloc}: glibc serves a freed block's size from its heaps from then on (its mmap threshold rises
 * to the largest block freed, up to 32 MiB), and memory freed inside a heap stays resident, so a server whose
 * pool had grown by 64 MiB kept the 64 MiB after every chunk was freed. A mapping of its own is given back to the
 * system by {@code munmap} at once.
 */
final class MappedMemory {
    private static final int PROT_READ = 1;
    private static final int PROT_WRITE = 2;
    private static final int MAP_PRIVATE = 2;
    private static final int MAP_ANONYMOUS = 0x20;
    private static final long MAP_FAILED = -1;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final MethodHandle MMAP = LINKER.downcallHandle(LINKER.defaultLookup().findOrThrow("mmap"),
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG),
            Linker.Option.captureCallState("errno"));
    private static final MethodHandle MUNMAP = LINKER.downcallHandle(LINKER.defaultLookup().findOrThrow("munmap"),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG), Linker.Option.captureCallState("errno"));

    private MappedMemory() {
    }

    /**
     * {@code size} bytes (a multiple of the OS page) aligned to {@code alignment} (a multiple of the OS page),
     * unmapped when {@code arena} closes.
     *
     * @throws OutOfMemoryError if the system refuses the mapping
     */
    static MemorySegment map(Arena arena, long size, long alignment) {
        // Map enough to contain an aligned range, then give back the slack on either side.
        long mapped = size + alignment - Chunk.OS_PAGE_SIZE;
        long start;
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CAPTURE_LAYOUT);
            MemorySegment p = (MemorySegment) MMAP.invokeExact(state, MemorySegment.NULL, mapped,
                    PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
            start = p.address();
            if (start == MAP_FAILED) {
                throw new OutOfMemoryError("mmap of " + mapped + " bytes failed: "
                        + Errno.describe((int) ERRNO.get(state, 0L)));
            }
        } catch (OutOfMemoryError e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("mmap", t);
        }
        long aligned = (start + alignment - 1) / alignment * alignment;
        unmap(start, aligned - start);
        unmap(aligned + size, start + mapped - (aligned + size));
        long address = aligned;
        return MemorySegment.ofAddress(address).reinterpret(size, arena, s -> unmap(address, size));
    }

    private static void unmap(long address, long length) {
        if (length == 0) {
            return;
        }
        int result;
        int errno;
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CAPTURE_LAYOUT);
            result = (int) MUNMAP.invokeExact(state, MemorySegment.ofAddress(address), length);
            errno = (int) ERRNO.get(state, 0L);
        } catch (Throwable t) {
            throw new IllegalStateException("munmap", t);
        }
        if (result != 0) {
            // Only arguments this class computed can fail: a bug, not a condition to recover from.
            throw new IllegalStateException("munmap(0x" + Long.toHexString(address) + ", " + length + ") failed: "
                    + Errno.describe(errno));
        }
    }
}
