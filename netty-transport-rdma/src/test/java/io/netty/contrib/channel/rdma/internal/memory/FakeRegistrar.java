package io.netty.contrib.channel.rdma.internal.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/** Counts registrations, hands out distinct lkeys, checks what it is given, and fails on request. */
public final class FakeRegistrar implements MemoryRegistrar {
    private static final long PAGE = 4096;
    /** int mincore(void *addr, size_t length, unsigned char *vec): which pages are resident. */
    private static final MethodHandle MINCORE = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("mincore").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                    ValueLayout.ADDRESS));

    private final AtomicInteger notResidentAtRegistration = new AtomicInteger();
    private final AtomicInteger nextLkey = new AtomicInteger(0x1000);
    private final AtomicInteger registrations = new AtomicInteger();
    private final AtomicInteger deregistrations = new AtomicInteger();
    private final Map<Integer, MemorySegment> live = new ConcurrentHashMap<>();
    private volatile Supplier<RuntimeException> failure;

    @Override
    public Registration register(MemorySegment chunk) {
        Supplier<RuntimeException> failure = this.failure;
        if (failure != null) {
            throw failure.get();
        }
        if (chunk.address() % 4096 != 0 || chunk.byteSize() % 4096 != 0) {
            throw new AssertionError("chunk not page-aligned: " + chunk);
        }
        if (!allResident(chunk)) {
            notResidentAtRegistration.incrementAndGet();
        }
        int lkey = nextLkey.getAndIncrement();
        registrations.incrementAndGet();
        live.put(lkey, chunk);
        return new Registration() {
            @Override
            public int lkey() {
                return lkey;
            }

            @Override
            public void close() {
                if (live.remove(lkey) == null) {
                    throw new AssertionError("deregistered twice: lkey " + lkey);
                }
                deregistrations.incrementAndGet();
            }
        };
    }

    /** Makes every following registration throw, or succeed again with null. */
    public void failWith(Supplier<RuntimeException> failure) {
        this.failure = failure;
    }

    public int registrations() {
        return registrations.get();
    }

    public int deregistrations() {
        return deregistrations.get();
    }

    public int liveRegistrations() {
        return live.size();
    }

    /** True if {@code length} bytes at {@code address} lie inside the live registration of {@code lkey}. */
    public boolean covers(int lkey, long address, long length) {
        MemorySegment chunk = live.get(lkey);
        return chunk != null && address >= chunk.address() && address + length <= chunk.address() + chunk.byteSize();
    }

    /** Chunks that had a page not yet touched when registered (registration would pin the wrong page). */
    public int notResidentAtRegistration() {
        return notResidentAtRegistration.get();
    }

    private static boolean allResident(MemorySegment chunk) {
        try (Arena arena = Arena.ofConfined()) {
            int pages = (int) (chunk.byteSize() / PAGE);
            MemorySegment vec = arena.allocate(pages);
            int rc = (int) MINCORE.invokeExact(chunk, chunk.byteSize(), vec);
            if (rc != 0) {
                throw new AssertionError("mincore failed");
            }
            for (int i = 0; i < pages; i++) {
                if ((vec.get(ValueLayout.JAVA_BYTE, i) & 1) == 0) {
                    return false;
                }
            }
            return true;
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    public Map<Integer, MemorySegment> live() {
        return live;
    }
}
