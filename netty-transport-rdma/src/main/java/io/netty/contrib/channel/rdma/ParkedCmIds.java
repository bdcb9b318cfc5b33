package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.util.ArrayList;
import java.util.List;

/**
 * The rdma_cm ids of connections that closed while a port of their device was down, kept until it is up again. One
 * per loop, used on its thread.
 *
 * <p>Destroying an id makes rdma_cm send a CM message for it: a DREQ for a connected one, a REJ for one being
 * connected ({@code rdma_disconnect} sends the DREQ earlier). Kernel rxe (6.1) sends CM messages on the device's GSI
 * queue pair, and one it cannot send, its netdev being down, leaves that queue pair sending nothing from then on:
 * after the link is back, connection requests reach the device and none is answered, no REP and no REJ, until the
 * device is created again (docs/faults.md, the link-down row). So a connection that closes while its port is down
 * frees its queue pair and memory at once and sends no DREQ, and its id waits here; once the port is active (its
 * {@code IBV_EVENT_PORT_ACTIVE}, or its state at the loop's next progress check) the id is destroyed and its DREQ
 * goes out on a live link, where the peer answers it or has let go already. The channel closed with the port's
 * cause meanwhile: only the id waits. A removed device's ids, and every id of a loop that shuts down, go at once.
 */
final class ParkedCmIds {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(ParkedCmIds.class);
    private final List<CmId> ids = new ArrayList<>();

    /** Keeps {@code id} if a port of its device is down (and the device is not being removed); whether it did. */
    boolean park(CmId id) {
        if (RdmaDevices.isRemoved(id.verbsAddress()) || !PortStates.isDown(id)) {
            return false;
        }
        // Events still reported for it (DISCONNECTED, TIMEWAIT_EXIT) are acknowledged and go nowhere.
        id.attach(null);
        if (ids.isEmpty()) {
            logger.info("{} has a port down: the rdma_cm ids of connections closed there are kept until it is active"
                    + " again (a CM message sent while it is down can leave the device unable to send any)",
                    id.verbs().deviceName());
        }
        ids.add(id);
        return true;
    }

    int size() {
        return ids.size();
    }

    /** Destroys the ids whose device has no port down any more; every id if {@code all}. */
    void release(boolean all) {
        if (ids.isEmpty()) {
            return;
        }
        int released = 0;
        for (int i = ids.size() - 1; i >= 0; i--) {
            CmId id = ids.get(i);
            if (all || RdmaDevices.isRemoved(id.verbsAddress()) || !PortStates.isDown(id)) {
                ids.remove(i);
                destroy(id);
                released++;
            }
        }
        if (released > 0) {
            logger.debug("destroyed {} rdma_cm ids kept while their port was down ({} left)", released, ids.size());
        }
    }

    /** Destroys the ids on the device whose context is at {@code contextAddress} (it was removed). */
    void deviceRemoved(long contextAddress) {
        for (int i = ids.size() - 1; i >= 0; i--) {
            CmId id = ids.get(i);
            if (id.verbsAddress() == contextAddress) {
                ids.remove(i);
                destroy(id);
            }
        }
    }

    private static void destroy(CmId id) {
        try {
            id.close();
        } catch (RuntimeException e) {
            logger.warn("failed to destroy an rdma_cm id kept while its port was down", e);
        }
    }
}
