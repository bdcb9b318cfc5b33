package io.netty.contrib.channel.rdma.internal.verbs;

/** {@code enum ibv_event_type}: what an asynchronous event of a device is about ({@code ibv_get_async_event(3)}). */
public final class IbvEventType {
    public static final int CQ_ERR = 0;
    public static final int QP_FATAL = 1;
    public static final int QP_REQ_ERR = 2;
    public static final int QP_ACCESS_ERR = 3;
    public static final int COMM_EST = 4;
    public static final int SQ_DRAINED = 5;
    public static final int PATH_MIG = 6;
    public static final int PATH_MIG_ERR = 7;
    public static final int DEVICE_FATAL = 8;
    public static final int PORT_ACTIVE = 9;
    public static final int PORT_ERR = 10;
    public static final int LID_CHANGE = 11;
    public static final int PKEY_CHANGE = 12;
    public static final int SM_CHANGE = 13;
    public static final int SRQ_ERR = 14;
    public static final int SRQ_LIMIT_REACHED = 15;
    public static final int QP_LAST_WQE_REACHED = 16;
    public static final int CLIENT_REREGISTER = 17;
    public static final int GID_CHANGE = 18;
    public static final int WQ_FATAL = 19;

    private static final String[] NAMES = {
            "CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST", "SQ_DRAINED", "PATH_MIG",
            "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR", "LID_CHANGE", "PKEY_CHANGE", "SM_CHANGE",
            "SRQ_ERR", "SRQ_LIMIT_REACHED", "QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE", "WQ_FATAL",
    };

    private IbvEventType() {
    }

    /** {@code IBV_EVENT_<name>}, or the number for one this version does not know. */
    public static String name(int type) {
        return type >= 0 && type < NAMES.length ? "IBV_EVENT_" + NAMES[type] : "IBV_EVENT(" + type + ')';
    }

    /** Whether the event's element is a queue pair ({@code element.qp}). */
    public static boolean isQueuePairEvent(int type) {
        return switch (type) {
            case QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, COMM_EST, SQ_DRAINED, PATH_MIG, PATH_MIG_ERR,
                 QP_LAST_WQE_REACHED -> true;
            default -> false;
        };
    }

    /** Whether the event's element is a port number ({@code element.port_num}). */
    public static boolean isPortEvent(int type) {
        return switch (type) {
            case PORT_ACTIVE, PORT_ERR, LID_CHANGE, PKEY_CHANGE, SM_CHANGE, CLIENT_REREGISTER, GID_CHANGE -> true;
            default -> false;
        };
    }

    /** What the event means for a queue pair that gets it, in a user's words. */
    public static String describe(int type) {
        return name(type) + switch (type) {
            case QP_ACCESS_ERR -> ": the device refused a remote access of the peer's (a wrong rkey, an address"
                    + " outside what it was granted, or a READ or atomic it was not granted)";
            case QP_REQ_ERR -> ": the device refused an invalid request of the peer's";
            case QP_FATAL -> ": the queue pair failed in the device";
            case QP_LAST_WQE_REACHED -> ": the queue pair entered the error state";
            case CQ_ERR -> ": the completion queue overran; every queue pair on it is in error";
            case SRQ_ERR -> ": the shared receive queue failed; every queue pair on it is in error";
            case DEVICE_FATAL -> ": the device failed";
            default -> "";
        };
    }
}
