package io.netty.contrib.rdma.micrometer;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.BaseUnits;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.netty.channel.EventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaByteBufAllocator;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaChannelMetric;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaIoHandlerMetric;
import io.netty.contrib.channel.rdma.RdmaPortCounters;
import io.netty.util.concurrent.EventExecutor;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;

/**
 * Micrometer meters for netty-transport-rdma: the counters of every RDMA event loop of a group (tagged
 * {@code loop} with its index in the group), the memory of a registered-memory allocator, the memory the process
 * has pinned against {@code RLIMIT_MEMLOCK}, and the port counters of every device rdma_cm reports
 * ({@code rdma.port.counter}, tagged {@code device}, {@code port} and {@code counter}); and, with
 * {@link #bindChannel}, one channel's counters until it closes. The meters read the transport's own counters
 * ({@link RdmaIoHandlerMetric}, {@link RdmaByteBufAllocator.Metric}, {@link RdmaChannelMetric}) when the
 * registry asks: nothing is counted twice, and nothing is paid between scrapes.
 *
 * <pre>
 * EventLoopGroup group = new MultiThreadIoEventLoopGroup(RdmaIoHandler.newFactory());
 * new RdmaMeterBinder(group).bindTo(registry);
 * </pre>
 */
public final class RdmaMeterBinder implements MeterBinder {
    private final EventLoopGroup group;
    private final RdmaByteBufAllocator allocator;
    private final Tags tags;

    /** The loops of {@code group} and the default allocator ({@link RdmaByteBufAllocator#defaultAllocator()}). */
    public RdmaMeterBinder(EventLoopGroup group) {
        this(group, RdmaByteBufAllocator.defaultAllocator(), Tags.empty());
    }

    /** The loops of {@code group} and {@code allocator}, every meter tagged with {@code tags}. */
    public RdmaMeterBinder(EventLoopGroup group, RdmaByteBufAllocator allocator, Iterable<Tag> tags) {
        this.group = Objects.requireNonNull(group, "group");
        this.allocator = Objects.requireNonNull(allocator, "allocator");
        this.tags = Tags.of(tags);
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        int index = 0;
        for (EventExecutor loop : group) {
            RdmaIoHandlerMetric m = RdmaIoHandler.metric(loop);
            Tags t = tags.and("loop", Integer.toString(index++));
            counter(registry, "rdma.loop.polls", "looks at the loop's completion queues", m,
                    RdmaIoHandlerMetric::polls, t, null);
            counter(registry, "rdma.loop.polls.empty", "looks that found nothing", m,
                    RdmaIoHandlerMetric::emptyPolls, t, null);
            counter(registry, "rdma.loop.completions", "work completions taken", m,
                    RdmaIoHandlerMetric::completions, t, null);
            counter(registry, "rdma.loop.sleeps", "times the loop blocked after its spin found nothing", m,
                    RdmaIoHandlerMetric::sleeps, t, null);
            counter(registry, "rdma.loop.wakeups", "times another thread woke the blocked loop", m,
                    RdmaIoHandlerMetric::wakeups, t, null);
            counter(registry, "rdma.loop.tcp.fallbacks", "client connects that went over TCP instead of RDMA", m,
                    RdmaIoHandlerMetric::tcpFallbacks, t, null);
            gauge(registry, "rdma.loop.queue.pairs", "queue pairs (connections) on the loop", m,
                    RdmaIoHandlerMetric::queuePairs, t, null);
            gauge(registry, "rdma.loop.queue.groups", "completion queue and shared receive queue pairs", m,
                    RdmaIoHandlerMetric::queueGroups, t, null);
            gauge(registry, "rdma.loop.cq.entries", "entries of the loop's completion queues", m,
                    RdmaIoHandlerMetric::completionQueueEntries, t, null);
            gauge(registry, "rdma.loop.cq.reserved", "completion queue entries that could be filled at once", m,
                    RdmaIoHandlerMetric::completionQueueReserved, t, null);
            gauge(registry, "rdma.loop.credits.granted", "receive credits granted to the loop's peers", m,
                    RdmaIoHandlerMetric::receiveCreditsGranted, t, null);
            gauge(registry, "rdma.loop.ring.memory", "bytes of receive rings the loop's connections pin", m,
                    RdmaIoHandlerMetric::ringMemory, t, BaseUnits.BYTES);
        }
        if (index > 0) {
            // Process-wide: read through the first loop, tagged without one.
            RdmaIoHandlerMetric m = RdmaIoHandler.metric(group.iterator().next());
            gauge(registry, "rdma.memory.pinned", "bytes this process has pinned by registration", m,
                    RdmaIoHandlerMetric::pinnedMemory, tags, BaseUnits.BYTES);
            gauge(registry, "rdma.memory.pinned.limit", "RLIMIT_MEMLOCK, NaN when no limit applies", m,
                    x -> x.pinnedMemoryLimit() < 0 ? Double.NaN : x.pinnedMemoryLimit(), tags, BaseUnits.BYTES);
        }
        for (RdmaPortCounters port : RdmaPortCounters.list()) {
            Tags t = tags.and("device", port.device(), "port", Integer.toString(port.port()));
            for (String name : port.names()) {
                gauge(registry, "rdma.port.counter", "the device's counter of the port (cumulative; tag counter:"
                        + " counters/... or hw_counters/... as in sysfs)", port, p -> p.value(name),
                        t.and("counter", name), null);
            }
        }
        RdmaByteBufAllocator.Metric a = allocator.metric();
        gauge(registry, "rdma.allocator.memory.registered", "bytes registered with the device, free ones too", a,
                RdmaByteBufAllocator.Metric::registeredMemory, tags, BaseUnits.BYTES);
        gauge(registry, "rdma.allocator.memory.used", "bytes held by live buffers", a,
                RdmaByteBufAllocator.Metric::usedDirectMemory, tags, BaseUnits.BYTES);
        gauge(registry, "rdma.allocator.memory.huge", "registered bytes on 2 MiB huge pages", a,
                RdmaByteBufAllocator.Metric::hugePageMemory, tags, BaseUnits.BYTES);
        gauge(registry, "rdma.allocator.page.size", "page size behind the chunk registered last", a,
                RdmaByteBufAllocator.Metric::pageSize, tags, BaseUnits.BYTES);
        gauge(registry, "rdma.allocator.chunks", "registered chunks", a,
                RdmaByteBufAllocator.Metric::chunkCount, tags, null);
    }

    /**
     * Registers {@code channel}'s counters (payload bytes each way, SENDs, ring writes, coalesced writes and the
     * SENDs that carried them, credit stalls with their time, rings offered and withdrawn, copies, zero-copy
     * buffers) tagged with {@code tags}, and removes them when the channel closes. One meter set per channel: for
     * the few long-lived connections worth watching one by one, not for ten thousand.
     */
    public static void bindChannel(MeterRegistry registry, RdmaChannel channel, Iterable<Tag> tags) {
        RdmaChannelMetric m = channel.metric();
        Tags t = Tags.of(tags);
        List<Meter> meters = new ArrayList<>();
        meters.add(counter(registry, "rdma.channel.bytes.written", "payload bytes sent", m,
                RdmaChannelMetric::bytesWritten, t, BaseUnits.BYTES));
        meters.add(counter(registry, "rdma.channel.bytes.read", "payload bytes received", m,
                RdmaChannelMetric::bytesRead, t, BaseUnits.BYTES));
        meters.add(counter(registry, "rdma.channel.sends", "SENDs posted", m, RdmaChannelMetric::sends, t, null));
        meters.add(counter(registry, "rdma.channel.ring.writes", "RDMA writes into the peer's ring", m,
                RdmaChannelMetric::ringWrites, t, null));
        meters.add(counter(registry, "rdma.channel.coalesced.writes", "small writes gathered into shared SENDs", m,
                RdmaChannelMetric::coalescedWrites, t, null));
        meters.add(counter(registry, "rdma.channel.coalesced.sends", "SENDs that carried gathered writes", m,
                RdmaChannelMetric::coalescedSends, t, null));
        meters.add(FunctionTimer.builder("rdma.channel.credit.stalls", m, RdmaChannelMetric::creditStalls,
                        RdmaChannelMetric::creditStallNanos, TimeUnit.NANOSECONDS)
                .description("writes stopped for want of the peer's credit or ring space, and how long")
                .tags(t).register(registry));
        meters.add(counter(registry, "rdma.channel.rings.offered", "receive rings offered to the peer", m,
                RdmaChannelMetric::ringsOffered, t, null));
        meters.add(counter(registry, "rdma.channel.rings.withdrawn", "receive rings withdrawn", m,
                RdmaChannelMetric::ringsWithdrawn, t, null));
        meters.add(counter(registry, "rdma.channel.copies", "received messages copied into the channel's allocator",
                m, RdmaChannelMetric::copies, t, null));
        meters.add(counter(registry, "rdma.channel.zero.copy.buffers", "received buffers handed over in place", m,
                RdmaChannelMetric::zeroCopyBuffers, t, null));
        channel.closeFuture().addListener(f -> {
            for (Meter meter : meters) {
                registry.remove(meter);
            }
        });
    }

    private static <T> Meter counter(MeterRegistry registry, String name, String description, T state,
                                     ToDoubleFunction<T> value, Tags tags, String unit) {
        return FunctionCounter.builder(name, state, value).description(description).tags(tags).baseUnit(unit)
                .register(registry);
    }

    private static <T> Meter gauge(MeterRegistry registry, String name, String description, T state,
                                   ToDoubleFunction<T> value, Tags tags, String unit) {
        return Gauge.builder(name, state, value).description(description).tags(tags).baseUnit(unit)
                .strongReference(true).register(registry);
    }
}
