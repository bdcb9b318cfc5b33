package io.netty.contrib.channel.rdma;

import io.netty.channel.IoHandle;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerContext;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.IoOps;
import io.netty.channel.IoRegistration;
import io.netty.contrib.channel.rdma.internal.verbs.CompletionChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CompletionQueue;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventType;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.Epoll;
import io.netty.contrib.channel.rdma.internal.verbs.EventFd;
import io.netty.contrib.channel.rdma.internal.verbs.IbvEventType;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.SendWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;
import io.netty.util.collection.IntObjectHashMap;
import io.netty.util.collection.IntObjectMap;
import io.netty.util.concurrent.SingleThreadEventExecutor;
import io.netty.util.concurrent.ThreadAwareExecutor;
import io.netty.util.internal.ObjectUtil;
import io.netty.util.internal.StringUtil;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

/**
 * The {@link IoHandler} of an RDMA event loop: drives every {@link RdmaChannel} and {@link RdmaServerChannel}
 * registered with the loop.
 *
 * <pre>
 * EventLoopGroup group = new MultiThreadIoEventLoopGroup(RdmaIoHandler.newFactory());
 * </pre>
 *
 * <p>Each loop owns one completion queue per RDMA device, shared by all its queue pairs, and one rdma_cm event
 * channel for its connections' connection-management events. {@link #run} polls the completion queues in batches
 * and dispatches each completion by its {@code wr_id}; when there is nothing to do it spins for a while
 * ({@link RdmaIoHandlerConfig}), then arms the completion queues and blocks in {@code epoll_wait} on their
 * completion channels, the rdma_cm event channel and a wakeup eventfd, until the next scheduled task is due.
 */
public final class RdmaIoHandler implements IoHandler {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaIoHandler.class);
    private static final long CM_TOKEN = -1;
    private static final long FD_TOKEN = -2;
    private static final long WAKE_TOKEN = -3;
    /** Tokens of the devices' async fds: this plus the device queue's index. */
    private static final long ASYNC_TOKEN = 1L << 32;
    /** Ready fds one {@code epoll_wait} reports: the wakeup eventfd, the rdma_cm channel, the fd watcher, devices. */
    private static final int MAX_READY = 8;
    private static final int YIELD_AFTER_SPINS = 256;
    /**
     * A spinning loop looks at the rdma_cm channel (a syscall) once this many turns and completions have gone by
     * since the last look: every few tens of microseconds while idle, every few turns under load.
     */
    private static final int CM_LOOK_EVERY = 256;
    /** At most this many extra polls of a batch for {@link #pollAgain()}. */
    private static final int MAX_POLLS_AGAIN = 2;
    /** A pure spin reads the clock (for due tasks) once per this many empty turns. */
    private static final int PURE_SPIN_CLOCK_MASK = 7;
    /** Work requests prepared before one {@code ibv_post_send}. */
    private static final int SEND_BATCH = 32;
    private int cmCountdown = CM_LOOK_EVERY;
    private boolean pollAgain;

    private final ThreadAwareExecutor executor;
    private final RdmaIoHandlerConfig config;
    private final IntObjectMap<Registration> registrations = new IntObjectHashMap<>();
    private final List<DeviceQueue> deviceQueues = new ArrayList<>(1);
    /** Every device's queue groups; a receive's {@code wr_id} names its group by the index here. */
    private final List<QueueGroup> groups = new ArrayList<>(1);
    private final IntObjectMap<Registration> byQpNum = new IntObjectHashMap<>();
    private WorkCompletions completions;
    /** Work requests one connection prepares and posts within one call (never left half-built between calls). */
    private SendWorkRequests sendWrs;
    private final int[] batchFlags = new int[SEND_BATCH];
    private Epoll epoll;
    private EventFd wakeFd;
    private CmEventChannel cmChannel;
    private FdWatcher fdWatcher;
    private final List<Registration> touched = new ArrayList<>();
    private final List<AutoCloseable> toClose = new ArrayList<>();
    /** Connections' rdma_cm ids to destroy with {@link #toClose}, or to keep while their port is down. */
    private final List<CmId> connectionIds = new ArrayList<>();
    private final ParkedCmIds parked = new ParkedCmIds();
    private final List<Registration> afterCompletions = new ArrayList<>();
    private int nextId;
    /** How long the adaptive loop spins before it blocks. */
    private final SpinPolicy spin;
    /** The periodic look at every handle's send progress ({@link #startProgressChecks}); null before the first. */
    private java.util.concurrent.ScheduledFuture<?> progressCheck;
    /** The receive rings of this loop's connections together ({@link RdmaIoHandlerConfig#ringMemory}). */
    private final RingMemory ringMemory;
    private volatile boolean blocked;
    private volatile boolean wakeRequested;

    /** Every live handler by the event loop it serves, for {@link #metric(Executor)}. */
    private static final Map<Object, RdmaIoHandler> BY_LOOP = new ConcurrentHashMap<>();
    /** Device events the connections' peers can cause: logged at most once per interval, with counts. */
    private final RefusalLog deviceEventLog = new RefusalLog(logger, "device events");

    // Counters of RdmaIoHandlerMetric: plain fields written by the loop thread only, but wakeups (other threads).
    long polls;
    long emptyPolls;
    long completionCount;
    long blocks;
    long tcpFallbacks;
    /** Started where RDMA is unavailable ({@link RdmaIoHandlerConfig#requireRdma(boolean)} false). */
    private boolean withoutRdma;
    private String withoutRdmaCause;
    final java.util.concurrent.atomic.AtomicLong wakeups = new java.util.concurrent.atomic.AtomicLong();
    final RdmaIoHandlerMetric metric = new RdmaIoHandlerMetric(this);

    private RdmaIoHandler(ThreadAwareExecutor executor, RdmaIoHandlerConfig config) {
        this.executor = executor;
        this.config = config;
        this.spin = new SpinPolicy(config.spinNanos());
        this.ringMemory = new RingMemory(config.ringMemory());
        FdWatcher.loadNettyEpoll();
        BY_LOOP.put(executor, this);
    }

    /**
     * The counters of the RDMA event loop {@code loop} (for example {@code channel.eventLoop()}): polls, empty
     * polls, completions, sleeps, wake-ups, queue groups and their completion queues.
     *
     * @throws IllegalArgumentException if {@code loop} is not a live event loop of an {@link RdmaIoHandler}
     */
    public static RdmaIoHandlerMetric metric(Executor loop) {
        RdmaIoHandler h = BY_LOOP.get(ObjectUtil.checkNotNull(loop, "loop"));
        if (h == null) {
            throw new IllegalArgumentException(loop + " is not a live event loop of an RdmaIoHandler");
        }
        return h.metric;
    }

    /** Queue groups (a completion queue and a shared receive queue each) and queue pairs, for the metric. */
    volatile int queueGroupCount;
    volatile int queuePairCount;
    /** {@link ParkedCmIds#size()}, for the metric. */
    volatile int parkedIdCount;
    /** Sums over the queue groups, for the metric: completion queue entries, those reserved, credits granted. */
    volatile long cqEntries;
    volatile long cqReserved;
    volatile long creditsGranted;
    volatile long receiveSlotMemory;

    /** Receive slots lent to readers now, over every queue group (loop thread; tests). */
    int lentSlots() {
        int lent = 0;
        for (int i = 0; i < groups.size(); i++) {
            QueueGroup g = groups.get(i);
            if (g != null) {
                lent += g.lentSlots();
            }
        }
        return lent;
    }

    /** Connections joined or left a queue group (loop thread): the metric's sums again. */
    private void queuesChanged() {
        long entries = 0;
        long reserved = 0;
        long granted = 0;
        long slots = 0;
        for (int i = 0; i < groups.size(); i++) {
            QueueGroup g = groups.get(i);
            if (g == null) {
                continue; // its device was removed
            }
            entries += g.completionQueueEntries();
            reserved += g.completionQueueReserved();
            granted += g.creditsGranted();
            slots += g.slotMemory();
        }
        cqEntries = entries;
        cqReserved = reserved;
        creditsGranted = granted;
        receiveSlotMemory = slots;
    }

    /** A factory of handlers with the default, adaptive {@link RdmaIoHandlerConfig}. */
    public static IoHandlerFactory newFactory() {
        return newFactory(new RdmaIoHandlerConfig());
    }

    /**
     * A factory of handlers with the given configuration.
     *
     * @throws UnsupportedOperationException when RDMA is not available ({@link Rdma#unavailabilityCause()})
     */
    public static IoHandlerFactory newFactory(RdmaIoHandlerConfig config) {
        RdmaIoHandlerConfig copy = ObjectUtil.checkNotNull(config, "config").copy();
        if (copy.requireRdma()) {
            Rdma.ensureAvailability();
        } else if (!Rdma.isAvailable()) {
            logger.info("RDMA event loops without RDMA (requireRdma(false)): their channels use TCP only ({})",
                    Rdma.unavailabilityCause().getMessage());
        }
        RdmaDevices.prefer(copy.hugePages());
        return new IoHandlerFactory() {
            @Override
            public IoHandler newHandler(ThreadAwareExecutor executor) {
                return new RdmaIoHandler(executor, copy);
            }

            @Override
            public boolean isChangingThreadSupported() {
                return true;
            }
        };
    }

    @Override
    public void initialize() {
        withoutRdma = !Rdma.isAvailable();
        if (!withoutRdma) {
            RdmaDevices.retain(config.hugePages());
        }
        try {
            completions = new WorkCompletions(config.pollBatch());
            sendWrs = new SendWorkRequests(SEND_BATCH, Sender.MAX_GATHER);
            epoll = new Epoll(MAX_READY);
            wakeFd = new EventFd();
            epoll.add(wakeFd.fd(), Epoll.EPOLLIN, WAKE_TOKEN);
            if (!withoutRdma) {
                try {
                    cmChannel = CmEventChannel.create();
                } catch (RuntimeException e) {
                    if (config.requireRdma()) {
                        throw e;
                    }
                    // A device is listed, but rdma_cm cannot be opened (e.g. no /dev/infiniband/rdma_cm here).
                    withoutRdma = true;
                    withoutRdmaCause = "rdma_cm is unavailable: " + e.getMessage();
                    RdmaDevices.release();
                    logger.info("RDMA event loop without RDMA (requireRdma(false)): {}", withoutRdmaCause);
                }
            }
            if (cmChannel != null) {
                cmChannel.setNonBlocking(true);
                epoll.add(cmChannel.fd(), Epoll.EPOLLIN, CM_TOKEN);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot initialize the RDMA event loop", e);
        }
        if (executor instanceof SingleThreadEventExecutor loop) {
            // With a quiet period of 0 the loop can leave its run loop without calling prepareToDestroy(): when the
            // shutdown begins after its isShuttingDown() check, confirmShutdown() ends it at once. Channels closed
            // only in destroy() then find the loop refusing tasks, and Netty cannot deregister them (it warns, and
            // channelInactive never comes). A shutdown hook runs in confirmShutdown() while tasks are still taken.
            loop.addShutdownHook(this::prepareToDestroy);
        }
    }

    SendWorkRequests sendWorkRequests() {
        return sendWrs;
    }

    int[] batchFlags() {
        return batchFlags;
    }

    /** The loop's rdma_cm event channel; null on a loop without RDMA ({@link #withoutRdmaCause()}). */
    CmEventChannel cmChannel() {
        return cmChannel;
    }

    /** Why this loop has no RDMA ({@link RdmaIoHandlerConfig#requireRdma(boolean)}). */
    String withoutRdmaCause() {
        if (withoutRdmaCause != null) {
            return withoutRdmaCause;
        }
        Throwable cause = Rdma.unavailabilityCause();
        return cause == null ? "the loop started without it" : cause.getMessage();
    }

    /** A client of this loop fell back to TCP (loop thread). */
    void tcpFallback() {
        tcpFallbacks++;
    }

    RdmaIoHandlerConfig config() {
        return config;
    }

    /**
     * A queue group of the loop for {@code device} with receive slots of {@code slotSize} bytes and room for a
     * connection with a send queue of {@code sqDepth} whose peer starts with {@code credits}: one with room, or a
     * new one. The connection has joined it ({@link QueueGroup#join}); it calls {@link QueueGroup#leave} when done.
     */
    QueueGroup queueGroup(RdmaDevices.Device device, int slotSize, int sqDepth, int credits) {
        assert executor.isExecutorThread(Thread.currentThread());
        DeviceQueue q = null;
        for (DeviceQueue d : deviceQueues) {
            if (d != null && d.context == device.context()) {
                q = d;
                break;
            }
        }
        if (q == null) {
            q = new DeviceQueue(device.context(), deviceQueues.size());
            try {
                epoll.add(q.channel.fd(), Epoll.EPOLLIN, q.index);
                // The device's async fd is the process's, watched by every loop that uses the device.
                epoll.add(q.context.asyncFd(), Epoll.EPOLLIN, ASYNC_TOKEN + q.index);
            } catch (IOException e) {
                q.close();
                throw new UncheckedIOException(e);
            }
            deviceQueues.add(q);
        }
        for (QueueGroup g : q.groups) {
            if (g.slotSize == slotSize && g.join(sqDepth, credits)) {
                return g;
            }
        }
        QueueGroup g = new QueueGroup(groups.size(), device.pd(), q.channel, device.allocator(), slotSize, config,
                executor, this::queuesChanged);
        if (!g.join(sqDepth, credits)) {
            g.close();
            throw new IllegalStateException("a new completion queue of " + g.cq.cqe() + " entries and shared receive"
                    + " queue of " + g.srq.maxWr() + " cannot take a connection with a send queue of " + sqDepth
                    + " and " + credits + " receive credits: lower RdmaChannelOption.SEND_QUEUE_DEPTH or raise "
                    + "RdmaIoHandlerConfig.completionQueueSize");
        }
        q.groups.add(g);
        groups.add(g);
        DeviceEvents.addGroup(g, this);
        queueGroupCount = liveGroups();
        queuesChanged();
        return g;
    }

    /**
     * Completions of {@code qp}'s receives (which name only their SRQ slot) and its async events go to
     * {@code registration}; {@code qp} is in {@code group}.
     */
    void bindQueuePair(QueuePair qp, QueueGroup group, Registration registration) {
        registration.group = group;
        byQpNum.put(qp.qpNum(), registration);
        DeviceEvents.bind(qp, registration);
        queuePairCount = byQpNum.size();
    }

    RingMemory ringMemory() {
        return ringMemory;
    }

    /** Before {@code qp} is destroyed. */
    void unbindQueuePair(QueuePair qp) {
        byQpNum.remove(qp.qpNum());
        DeviceEvents.unbind(qp);
        queuePairCount = byQpNum.size();
    }

    /** A device event of {@code registration}'s queue pair, taken by whichever loop found it. Any thread. */
    void queuePairEvent(Registration registration, int type) {
        if (executor.isExecutorThread(Thread.currentThread())) {
            deliver(registration, type);
        } else {
            executor.execute(() -> deliver(registration, type));
        }
    }

    /** Runs {@code task} on this loop (any thread). */
    void execute(Runnable task) {
        executor.execute(task);
    }

    /** A device-wide event ({@code IBV_EVENT_DEVICE_FATAL}): this loop's connections on the device. */
    void deviceEvent(long contextAddress, int type) {
        for (DeviceQueue q : deviceQueues) {
            if (q != null && q.context.address() == contextAddress) {
                for (QueueGroup g : q.groups) {
                    queueEvent(g, type);
                }
            }
        }
    }

    /**
     * {@code device} was removed ({@link RdmaDevices#removed}): this loop's channels and listeners on it close with
     * {@code cause}, then its completion channel, queue groups and receive-ring memory on the device are freed, so
     * that the device's protection domain, and then its context, can go. Loop thread.
     */
    void deviceRemoved(RdmaDevices.Device device, String cause) {
        long address = device.context().address();
        for (Registration r : registrations.values().toArray(new Registration[0])) {
            try {
                r.handle.deviceRemoved(address, cause);
            } catch (Throwable t) {
                logger.warn("failed to close {} on the removal of its device", r.handle, t);
            }
        }
        parked.deviceRemoved(address);
        parkedIdCount = parked.size();
        for (int i = 0; i < deviceQueues.size(); i++) {
            DeviceQueue q = deviceQueues.get(i);
            if (q == null || q.context != device.context()) {
                continue;
            }
            for (QueueGroup g : q.groups) {
                DeviceEvents.removeGroup(g);
                groups.set(g.index, null);
                try {
                    g.close();
                } catch (RuntimeException e) {
                    logger.warn("{}: queues still in use on a removed device", g, e);
                }
            }
            q.groups.clear();
            try {
                epoll.remove(q.channel.fd());
                epoll.remove(q.context.asyncFd());
            } catch (IOException | RuntimeException e) {
                logger.debug("epoll_ctl DEL of a removed device's fds failed", e);
            }
            try {
                q.close();
            } catch (RuntimeException e) {
                logger.warn("completion channel of a removed device still in use", e);
            }
            deviceQueues.set(i, null);
        }
        ringMemory.deviceRemoved(device.pd());
        queueGroupCount = liveGroups();
        queuesChanged();
    }

    private int liveGroups() {
        int live = 0;
        for (QueueGroup g : groups) {
            live += g != null ? 1 : 0;
        }
        return live;
    }

    /**
     * Takes the pending async events of the device whose context is at {@code contextAddress}, if this loop uses it:
     * the events of this loop's channels are handled before this returns. Loop thread.
     */
    void takeAsyncEvents(long contextAddress) {
        for (int i = 0; i < deviceQueues.size(); i++) {
            DeviceQueue q = deviceQueues.get(i);
            if (q != null && q.context.address() == contextAddress) {
                DeviceEvents.takeAll(q.context, q.asyncEvent);
            }
        }
    }

    /** The loops alive now. */
    static java.util.Collection<RdmaIoHandler> loops() {
        return new ArrayList<>(BY_LOOP.values());
    }

    /**
     * {@code port} of the device went down ({@code IBV_EVENT_PORT_ERR}): this loop's connections on it close with
     * {@code cause}.
     */
    void portDown(long contextAddress, int port, String cause) {
        for (DeviceQueue q : deviceQueues) {
            if (q == null || q.context.address() != contextAddress) {
                continue;
            }
            for (Registration r : byQpNum.values().toArray(new Registration[0])) {
                if (r.group != null && q.groups.contains(r.group) && (r.valid || r.handle.lingering())) {
                    try {
                        r.handle.portDown(port, cause);
                    } catch (Throwable t) {
                        logger.warn("failed to close {} on {}", r.handle, cause, t);
                    }
                }
            }
        }
    }

    /** A device event of {@code group}'s completion queue or shared receive queue: its connections. */
    void queueEvent(QueueGroup group, int type) {
        if (type == IbvEventType.SRQ_LIMIT_REACHED) {
            logger.debug("{}: {} (no limit is armed)", group, IbvEventType.name(type));
            return;
        }
        logger.warn("{}: {}: closing its connections", group, IbvEventType.describe(type));
        for (Registration r : byQpNum.values().toArray(new Registration[0])) {
            if (r.group == group) {
                deliver(r, type);
            }
        }
    }

    private void deliver(Registration registration, int type) {
        if (!registration.valid && !registration.handle.lingering()) {
            return;
        }
        if (type != IbvEventType.QP_LAST_WQE_REACHED && type != IbvEventType.COMM_EST) {
            deviceEventLog.log(RefusalLog.Kind.QUEUE_PAIR_FAILED, registration.handle + ": "
                    + IbvEventType.describe(type), null);
        }
        try {
            registration.handle.asyncEvent(type);
        } catch (Throwable t) {
            logger.warn("failed to handle {} of {}", IbvEventType.name(type), registration.handle, t);
        }
    }

    @Override
    public int run(IoHandlerContext context) {
        wakeRequested = false;
        // rdma_cm events are rare and each look is a syscall: look every so many turns, and when epoll says so.
        int work = poll(cmTurn());
        if (work > 0 || !context.canBlock()) {
            return work;
        }
        // Spin from the last work on: while completions keep coming sooner than the spin window apart, the loop
        // never blocks. IoHandlerContext.delayNanos takes System.nanoTime(); deadlineNanos() would not (it counts
        // from the executor's ticker), which is why the spin is bounded by the delay.
        long now = System.nanoTime();
        long taskDue = now + context.delayNanos(now);
        long spinStart = now;
        boolean pureSpin = config.pureSpin();
        long spinUntil = pureSpin ? Long.MAX_VALUE : now + spin.window();
        int spins = 0;
        long longestTurn = 0;
        while (!wakeRequested) {
            work = poll(cmTurn());
            if (work > 0) {
                if (!pureSpin) {
                    spin.spun(System.nanoTime() - spinStart, longestTurn);
                }
                return work;
            }
            if (pureSpin && (++spins & PURE_SPIN_CLOCK_MASK) != 0) {
                // It owns its core and never ends its spin: the clock only tells when a task is due.
                Thread.onSpinWait();
                continue;
            }
            long last = now;
            now = System.nanoTime();
            // A turn of the spin takes well under a microsecond: a longer one means the thread lost its core
            // (to a yield or to the scheduler), so other threads want the CPU this loop is spinning on.
            longestTurn = Math.max(longestTurn, now - last);
            if (now - taskDue >= 0) {
                // A scheduled task is due: the event loop runs it, then calls run() again.
                return 0;
            }
            if (now - spinUntil >= 0) {
                break;
            }
            // Adaptive loops share the machine: after a while, let other threads run. Pure spin owns its core.
            if (++spins < YIELD_AFTER_SPINS || pureSpin) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
        if (wakeRequested) {
            return 0;
        }
        return block(context, longestTurn);
    }

    /** Whether this turn of the loop looks at the rdma_cm channel (a syscall) without epoll having said so. */
    private boolean cmTurn() {
        if (--cmCountdown > 0) {
            return false;
        }
        cmCountdown = CM_LOOK_EVERY;
        return true;
    }

    /**
     * {@code longestTurn}: the longest turn of the spin before this block; over {@link SpinPolicy#PREEMPTED_NANOS}
     * the spin lost its core to other threads.
     */
    private int block(IoHandlerContext context, long longestTurn) {
        for (int i = 0; i < groups.size(); i++) {
            QueueGroup g = groups.get(i);
            if (g != null) {
                g.cq.reqNotify(false);
            }
        }
        // A completion between the last poll and arming does not signal the channel: look once more. rdma_cm
        // events need no look: epoll watches their channel.
        int work = poll(false);
        if (work > 0) {
            return work;
        }
        long delayNanos = context.delayNanos(System.nanoTime());
        int timeoutMillis = (int) Math.min(Integer.MAX_VALUE, TimeUnit.NANOSECONDS.toMillis(delayNanos + 999_999));
        boolean cmReady = false;
        long blockedAt = System.nanoTime();
        blocked = true;
        try {
            if (!wakeRequested && timeoutMillis > 0) {
                blocks++;
                int ready = epoll.wait(timeoutMillis);
                for (int i = 0; i < ready; i++) {
                    long token = epoll.token(i);
                    if (token == WAKE_TOKEN) {
                        wakeFd.drain();
                    } else if (token == CM_TOKEN || token == FD_TOKEN || token >= ASYNC_TOKEN) {
                        cmReady = true;
                    } else if (token >= 0 && token < deviceQueues.size() && deviceQueues.get((int) token) != null) {
                        deviceQueues.get((int) token).takeEvent();
                    }
                }
            } else {
                cmReady = true; // did not wait: nothing said whether rdma_cm has news, so look
            }
        } catch (IOException e) {
            logger.warn("epoll_wait failed", e);
            cmReady = true;
        } finally {
            blocked = false;
        }
        int completed = pollCompletions();
        long waited = System.nanoTime() - blockedAt;
        if (longestTurn > SpinPolicy.PREEMPTED_NANOS) {
            spin.lostCore(longestTurn);
        } else if (completed > 0 || waited > config.spinNanos()) {
            // (A short block that a task or a timer ended says nothing about the traffic.)
            spin.blocked(waited);
        }
        return completed + poll(cmReady);
    }

    /** Dispatches every completion (and, if asked, every rdma_cm event) that is ready; returns how many. */
    private int poll(boolean cmEvents) {
        int work = pollCompletions();
        while (cmEvents && cmChannel != null) {
            CmEvent event;
            try {
                event = cmChannel.pollEvent();
            } catch (RuntimeException e) {
                logger.warn("rdma_get_cm_event failed", e);
                continue;
            }
            if (event == null) {
                break;
            }
            work++;
            try {
                CmId target = event.type() == CmEventType.CONNECT_REQUEST ? event.listenId() : event.id();
                if (target != null && target.attachment() instanceof RdmaIoHandle handle) {
                    handle.cmEvent(event);
                } else if (event.type() == CmEventType.CONNECT_REQUEST) {
                    // Its listener is gone: refuse and free the new id.
                    event.ack();
                    event.id().reject(null);
                    event.id().close();
                }
            } catch (Throwable t) {
                logger.warn("failed to handle rdma_cm event {}", event, t);
            } finally {
                event.ack();
            }
        }
        if (cmEvents && fdWatcher != null) {
            work += fdWatcher.processReady();
        }
        if (cmEvents) {
            for (int i = 0; i < deviceQueues.size(); i++) {
                DeviceQueue q = deviceQueues.get(i);
                if (q != null) {
                    work += DeviceEvents.takeAll(q.context, q.asyncEvent);
                }
            }
        }
        if (!afterCompletions.isEmpty()) {
            // A peer's disconnect can be reported after its last messages reached the CQ but before this loop
            // polled them: poll again, then let the channels decide whether everything has arrived.
            work += pollCompletions();
            for (int i = 0; i < afterCompletions.size(); i++) {
                Registration r = afterCompletions.get(i);
                try {
                    if (r.valid || r.handle.lingering()) {
                        r.handle.completionBatchDone();
                    }
                } catch (Throwable t) {
                    logger.warn("failed to handle the disconnect of {}", r.handle, t);
                }
            }
            afterCompletions.clear();
        }
        closeDeferred();
        return work;
    }

    private int pollCompletions() {
        polls++;
        int work = pollCompletionsOnce();
        // A channel that just posted the invalidation its next ring write waits for: it may be complete already (the
        // software device completes a LOCAL_INV as it is posted when nothing is outstanding before it), and then the
        // write is delivered in this batch, not after a turn of the loop (one-thread 16 KiB echo 3.1-3.8 -> 2.9 µs).
        for (int again = 0; again < MAX_POLLS_AGAIN && pollAgain; again++) {
            pollAgain = false;
            work += pollCompletionsOnce();
        }
        pollAgain = false;
        if (work == 0) {
            emptyPolls++;
        }
        cmCountdown -= work;
        completionCount += work;
        return work;
    }

    /**
     * Polls the completion queue once more at the end of this batch: a handle posted work whose completion the
     * delivery of what it received waits for (the LOCAL_INV of a ring slab).
     */
    void pollAgain() {
        pollAgain = true;
    }

    private int pollCompletionsOnce() {
        int work = 0;
        WorkCompletions wcs = completions;
        for (int i = 0; i < groups.size(); i++) {
            QueueGroup g = groups.get(i);
            if (g == null) {
                continue;
            }
            int n;
            int found = 0;
            do {
                n = g.cq.poll(wcs);
                for (int j = 0; j < n; j++) {
                    dispatch(wcs, j);
                }
                found += n;
            } while (n == wcs.capacity());
            work += found;
            // Receives to post again (freed slots; others' taken by a flood) do not wait for this loop's next send,
            // but under traffic they go in batches (QueueGroup.flushDue): every credit is backed meanwhile.
            if (found == 0 || g.flushDue()) {
                g.flush();
            }
        }
        for (int i = 0; i < touched.size(); i++) {
            Registration r = touched.get(i);
            r.touched = false;
            try {
                r.handle.completionBatchDone();
            } catch (Throwable t) {
                logger.warn("failed to finish a batch of completions of {}", r.handle, t);
            }
        }
        touched.clear();
        return work;
    }

    /** Calls the handle's {@link RdmaIoHandle#completionBatchDone()} after the completion queue is polled again. */
    void afterNextCompletions(Registration registration) {
        afterCompletions.add(registration);
    }

    /** Closes {@code object} once the event being handled (if any) is acknowledged. Loop thread only. */
    void closeLater(AutoCloseable object) {
        toClose.add(object);
    }

    /**
     * A closed connection's rdma_cm id, destroyed like {@link #closeLater} objects, unless a port of its device is
     * down: then it waits until the port is up ({@link ParkedCmIds}).
     */
    void closeConnectionIdLater(CmId id) {
        connectionIds.add(id);
    }

    private void closeDeferred() {
        for (int i = 0; i < toClose.size(); i++) {
            try {
                toClose.get(i).close();
            } catch (Exception e) {
                logger.warn("failed to close {}", toClose.get(i), e);
            }
        }
        toClose.clear();
        if (connectionIds.isEmpty()) {
            return;
        }
        for (int i = 0; i < connectionIds.size(); i++) {
            CmId id = connectionIds.get(i);
            try {
                if (!parked.park(id)) {
                    id.close();
                }
            } catch (RuntimeException e) {
                logger.warn("failed to close {}", id, e);
            }
        }
        connectionIds.clear();
        parkedIdCount = parked.size();
    }

    /** Destroys the kept rdma_cm ids whose port is up again ({@link ParkedCmIds}). */
    void releaseParkedIds() {
        if (parked.size() > 0) {
            parked.release(false);
            parkedIdCount = parked.size();
        }
    }

    private void dispatch(WorkCompletions completions, int index) {
        long wrId = completions.wrId(index);
        Registration r;
        if (WrId.kind(wrId) == WrId.RECV) {
            // A shared receive queue's slot: the queue pair says whose it is.
            QueueGroup g = groups.get(WrId.channelId(wrId));
            g.completed();
            r = byQpNum.get(completions.qpNum(index));
            if (r == null || !r.valid && !r.handle.lingering()) {
                // Its connection is gone (a late message): the slot goes back.
                g.orphaned();
                g.release(WrId.slot(wrId));
                return;
            }
        } else {
            r = registrations.get(WrId.channelId(wrId));
        }
        if (r == null || !r.valid && !r.handle.lingering()) {
            // A completion of a queue pair already closed (e.g. flushed receives): nothing waits for it.
            return;
        }
        try {
            r.handle.completion(completions, index);
            if (!r.touched) {
                r.touched = true;
                touched.add(r);
            }
        } catch (Throwable t) {
            logger.warn("failed to handle completion {}", completions.toString(index), t);
        }
    }

    /**
     * From the first registration on, every quarter of {@link RdmaIoHandlerConfig#sendStallTimeoutMillis} (at least
     * 100 ms, at most a second): each handle whose device has owed it a send completion for longer than that fails
     * (0: never), and idle channels with {@code SO_KEEPALIVE} probe their peers.
     */
    private void startProgressChecks() {
        long limitMillis = config.sendStallTimeoutMillis();
        if (progressCheck != null || !(executor instanceof SingleThreadEventExecutor loop)) {
            return;
        }
        long period = limitMillis == 0 ? 1000 : Math.min(1000, Math.max(100, limitMillis / 4));
        long limitNanos = TimeUnit.MILLISECONDS.toNanos(limitMillis);
        progressCheck = loop.scheduleAtFixedRate(() -> {
            releaseParkedIds();
            long now = System.nanoTime();
            for (Registration r : registrations.values().toArray(new Registration[0])) {
                try {
                    r.handle.checkProgress(now, limitNanos);
                } catch (Throwable t) {
                    logger.warn("failed to check the progress of {}", r.handle, t);
                }
            }
        }, period, period, TimeUnit.MILLISECONDS);
    }

    @Override
    public void prepareToDestroy() {
        if (progressCheck != null) {
            progressCheck.cancel(false);
            progressCheck = null;
        }
        if (fdWatcher != null) {
            fdWatcher.closeHandles();
        }
        for (Registration r : registrations.values().toArray(new Registration[0])) {
            try {
                r.handle.close();
            } catch (Exception e) {
                logger.warn("failed to close {}", r.handle, e);
            }
        }
    }

    @Override
    public void destroy() {
        // Channels registered after the last prepareToDestroy() (accepted during shutdown) go too.
        prepareToDestroy();
        closeDeferred();
        parked.release(true);
        parkedIdCount = 0;
        for (QueueGroup g : groups) {
            if (g == null) {
                continue;
            }
            DeviceEvents.removeGroup(g);
            try {
                g.close();
            } catch (RuntimeException e) {
                logger.warn("queues of an event loop still in use at shutdown ({} registrations left): {}",
                        registrations.size(), g, e);
            }
        }
        groups.clear();
        queueGroupCount = 0;
        BY_LOOP.remove(executor, this);
        for (DeviceQueue q : deviceQueues) {
            if (q == null) {
                continue;
            }
            try {
                q.close();
            } catch (RuntimeException e) {
                logger.warn("completion channel of an event loop still in use at shutdown", e);
            }
        }
        deviceQueues.clear();
        // Before the devices go: rings' blocks nobody holds are deregistered.
        ringMemory.close();
        if (completions != null) {
            completions.close();
        }
        if (sendWrs != null) {
            sendWrs.close();
        }
        if (cmChannel != null) {
            try {
                cmChannel.close();
            } catch (RuntimeException e) {
                logger.warn("rdma_cm event channel of an event loop still in use at shutdown", e);
            }
        }
        if (fdWatcher != null) {
            fdWatcher.close();
        }
        if (wakeFd != null) {
            wakeFd.close();
        }
        if (epoll != null) {
            epoll.close();
        }
        if (!withoutRdma) {
            RdmaDevices.release();
        }
    }

    @Override
    public IoRegistration register(IoHandle handle) {
        if (handle instanceof FdIoHandle || FdWatcher.isEpollHandle(handle.getClass())) {
            return registerFd(handle);
        }
        RdmaIoHandle rdmaHandle = cast(handle);
        int id;
        do {
            id = ++nextId;
        } while (id == 0 || registrations.containsKey(id));
        Registration registration = new Registration(id, rdmaHandle);
        registrations.put(id, registration);
        startProgressChecks();
        handle.registered();
        return registration;
    }

    /**
     * A plain fd (a kernel socket: an {@link FdIoHandle} or one of Netty's epoll channels): watched by the loop's
     * {@link FdWatcher}, created on first use.
     */
    private IoRegistration registerFd(IoHandle handle) {
        try {
            if (fdWatcher == null) {
                FdWatcher watcher = new FdWatcher(executor);
                try {
                    epoll.add(watcher.fd(), Epoll.EPOLLIN, FD_TOKEN);
                } catch (IOException e) {
                    watcher.close();
                    throw e;
                }
                fdWatcher = watcher;
            }
            return fdWatcher.register(handle);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot watch the fd of " + handle + " on the RDMA event loop", e);
        }
    }

    @Override
    public void wakeup() {
        wakeRequested = true;
        if (blocked) {
            wakeups.incrementAndGet(); // on the way to a system call: the atomic costs nothing that counts
            wakeFd.signal();
        }
    }

    @Override
    public boolean isCompatible(Class<? extends IoHandle> handleType) {
        return RdmaIoHandle.class.isAssignableFrom(handleType) || FdWatcher.isCompatible(handleType);
    }

    private static RdmaIoHandle cast(IoHandle handle) {
        if (handle instanceof RdmaIoHandle h) {
            return h;
        }
        throw new IllegalArgumentException("IoHandle of type " + StringUtil.simpleClassName(handle) + " not supported");
    }

    /** What the loop knows of one channel; {@link #attachment()} returns this registration. */
    final class Registration implements IoRegistration {
        final int id;
        final RdmaIoHandle handle;
        boolean valid = true;
        boolean touched;
        /** The queue group of the channel's queue pair, once it has one. */
        QueueGroup group;

        Registration(int id, RdmaIoHandle handle) {
            this.id = id;
            this.handle = handle;
        }

        int id() {
            return id;
        }

        RdmaIoHandler handler() {
            return RdmaIoHandler.this;
        }

        @SuppressWarnings("unchecked")
        @Override
        public <T> T attachment() {
            return (T) this;
        }

        @Override
        public long submit(IoOps ops) {
            throw new UnsupportedOperationException("RDMA channels post work requests directly");
        }

        @Override
        public boolean isValid() {
            return valid;
        }

        @Override
        public boolean cancel() {
            if (!valid) {
                return false;
            }
            valid = false;
            if (executor.isExecutorThread(Thread.currentThread())) {
                remove();
            } else {
                executor.execute(this::remove);
            }
            return true;
        }

        private void remove() {
            if (!handle.lingering()) {
                registrations.remove(id);
            }
            handle.unregistered();
        }

        /** The handle finished what it had in flight after deregistering: forget it. */
        void lingerDone() {
            if (!valid) {
                registrations.remove(id);
            }
        }
    }

    /** The loop's completion channel for one device, shared by the CQs of its queue groups. */
    static final class DeviceQueue {
        final VerbsContext context;
        final CompletionChannel channel;
        final int index;
        final List<QueueGroup> groups = new ArrayList<>(1);
        private final Arena arena = Arena.ofShared();
        /** Where this loop takes the device's async events. */
        final MemorySegment asyncEvent = VerbsContext.allocateAsyncEvent(arena);

        DeviceQueue(VerbsContext context, int index) {
            this.context = context;
            this.index = index;
            this.channel = context.createCompletionChannel();
            this.channel.setNonBlocking(true);
            context.setAsyncNonBlocking(true);
        }

        /**
         * Takes the completion event epoll reported (one per arming). Another one left pending keeps the level-
         * triggered fd readable, so the next wait returns at once and takes it: no extra syscall to find out.
         */
        void takeEvent() {
            CompletionQueue cq = channel.getCqEvent();
            if (cq != null) {
                // Armed again before its completions are polled (ibv_get_cq_event(3)'s order): a completion that
                // comes while the loop works signals the channel, and the next wait returns at once. On the
                // software device a CQ that is armed also keeps its peers' messages on the doorbell: without it,
                // a message that came between this event and the next arm woke the device's progress thread,
                // which then held the ring while the loop waited for it; on a machine with more runnable threads
                // than cores that thread waits milliseconds for a core (docs/benchmarks/busy-machine.md).
                cq.reqNotify(false);
            }
            if (cq != null && cq.unackedEvents() >= 64) {
                cq.ackEvents(cq.unackedEvents());
            }
        }

        void close() {
            channel.close();
            arena.close();
        }
    }
}
