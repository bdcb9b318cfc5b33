package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.IbvEventType;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.lang.foreign.MemorySegment;
import java.util.HashSet;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A device's asynchronous events ({@code ibv_get_async_event}): a queue pair, completion queue or shared receive
 * queue that failed, a port that went down or came up, a device that failed. The device has one async fd for the
 * whole process; every loop that uses the device watches it, and whichever finds an event takes it. The event's
 * object is looked up while the event is not yet acknowledged (an object with unacknowledged events cannot be
 * destroyed, {@code ibv_get_async_event(3)}, so its address cannot have been reused), then the event is
 * acknowledged at once and handed to the loop that owns the object.
 */
final class DeviceEvents {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(DeviceEvents.class);
    /** Every bound queue pair of every loop by its address: the loop that takes an event may not be its owner. */
    private static final Map<Long, RdmaIoHandler.Registration> QUEUE_PAIRS = new ConcurrentHashMap<>();
    /** Every queue group by the addresses of its completion queue and shared receive queue, likewise. */
    private static final Map<Long, QueueGroup> QUEUES = new ConcurrentHashMap<>();
    /** The loop of each queue group. */
    private static final Map<QueueGroup, RdmaIoHandler> OWNERS = new ConcurrentHashMap<>();

    private DeviceEvents() {
    }

    /** {@code qp}'s events go to {@code registration} from now on; before anything can fail it. */
    static void bind(QueuePair qp, RdmaIoHandler.Registration registration) {
        QUEUE_PAIRS.put(qp.address(), registration);
    }

    /** Before {@code qp} is destroyed. */
    static void unbind(QueuePair qp) {
        QUEUE_PAIRS.remove(qp.address());
    }

    static void addGroup(QueueGroup group, RdmaIoHandler owner) {
        OWNERS.put(group, owner);
        queueCreated(group.cq.address(), group);
        if (group.srq != null) {
            queueCreated(group.srq.address(), group);
        }
    }

    /** Before {@code group}'s queues are destroyed. */
    static void removeGroup(QueueGroup group) {
        queueDestroyed(group.cq.address(), group);
        if (group.srq != null) {
            queueDestroyed(group.srq.address(), group);
        }
        OWNERS.remove(group);
    }

    /** A completion queue or shared receive queue of {@code group} at {@code address} (it recreates its SRQ). */
    static void queueCreated(long address, QueueGroup group) {
        QUEUES.put(address, group);
    }

    /** Before the queue at {@code address} of {@code group} is destroyed. */
    static void queueDestroyed(long address, QueueGroup group) {
        QUEUES.remove(address, group);
    }

    /** Takes every event pending on {@code context} into {@code event}; returns how many. Any loop thread. */
    static int takeAll(VerbsContext context, MemorySegment event) {
        int taken = 0;
        while (true) {
            try {
                if (!context.getAsyncEvent(event)) {
                    return taken;
                }
            } catch (RuntimeException e) {
                logger.warn("ibv_get_async_event of {} failed", context.deviceName(), e);
                return taken;
            }
            taken++;
            try {
                take(context, event);
            } catch (RuntimeException e) {
                // Acknowledged already; its loop may be shutting down and refuse the task.
                logger.debug("{}: could not hand over {}", context.deviceName(),
                        IbvEventType.name(VerbsContext.asyncEventType(event)), e);
            }
        }
    }

    private static void take(VerbsContext context, MemorySegment event) {
        int type = VerbsContext.asyncEventType(event);
        if (IbvEventType.isQueuePairEvent(type)) {
            RdmaIoHandler.Registration r = QUEUE_PAIRS.get(VerbsContext.asyncEventObject(event));
            VerbsContext.ackAsyncEvent(event);
            if (r != null) {
                r.handler().queuePairEvent(r, type);
            } else {
                // Its connection already let the queue pair go (our own close moves it to the error state).
                logger.debug("{}: {} of a queue pair no channel holds", context.deviceName(), IbvEventType.name(type));
            }
        } else if (type == IbvEventType.CQ_ERR || type == IbvEventType.SRQ_ERR
                || type == IbvEventType.SRQ_LIMIT_REACHED) {
            QueueGroup group = QUEUES.get(VerbsContext.asyncEventObject(event));
            VerbsContext.ackAsyncEvent(event);
            RdmaIoHandler owner = group != null ? OWNERS.get(group) : null;
            if (owner != null) {
                owner.execute(() -> owner.queueEvent(group, type));
            }
        } else if (IbvEventType.isPortEvent(type)) {
            int port = VerbsContext.asyncEventPort(event);
            VerbsContext.ackAsyncEvent(event);
            portEvent(context, port, type);
        } else {
            VerbsContext.ackAsyncEvent(event);
            if (type == IbvEventType.DEVICE_FATAL) {
                logger.error("{}: {}: closing every connection on it", context.deviceName(),
                        IbvEventType.describe(type));
                long device = context.address();
                for (RdmaIoHandler owner : new HashSet<>(OWNERS.values())) {
                    owner.execute(() -> owner.deviceEvent(device, type));
                }
            } else {
                logger.warn("{}: {}", context.deviceName(), IbvEventType.name(type));
            }
        }
    }

    /**
     * A port that goes down leaves its queue pairs in RTS (kernel rxe does not move them; their requests go nowhere
     * and fail by retry exhaustion, seconds later): its connections are closed now, with the event as their cause,
     * and new ones there are refused until it is back ({@link PortStates}). The listeners stay: rdma_cm keeps a
     * listening id across a port's down and up, so a server serves again once the port is active.
     */
    private static void portEvent(VerbsContext context, int port, int type) {
        String device = context.deviceName();
        if (type == IbvEventType.PORT_ERR) {
            String cause = PortStates.down(device, port);
            logger.warn("{}: closing every connection on it", cause);
            long address = context.address();
            for (RdmaIoHandler owner : new HashSet<>(OWNERS.values())) {
                owner.execute(() -> owner.portDown(address, port, cause));
            }
        } else if (type == IbvEventType.PORT_ACTIVE) {
            PortStates.up(device, port);
            logger.info("port {} of {} is active ({}): connections there go through again", port, device,
                    IbvEventType.name(type));
            for (RdmaIoHandler owner : new HashSet<>(OWNERS.values())) {
                owner.execute(owner::releaseParkedIds);
            }
        } else {
            logger.info("port {} of {}: {}", port, device, IbvEventType.name(type));
        }
    }
}
