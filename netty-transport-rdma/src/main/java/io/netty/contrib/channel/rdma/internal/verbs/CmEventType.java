package io.netty.contrib.channel.rdma.internal.verbs;

/** {@code enum rdma_cm_event_type}. */
public final class CmEventType {
    public static final int ADDR_RESOLVED = 0;
    public static final int ADDR_ERROR = 1;
    public static final int ROUTE_RESOLVED = 2;
    public static final int ROUTE_ERROR = 3;
    public static final int CONNECT_REQUEST = 4;
    public static final int CONNECT_RESPONSE = 5;
    public static final int CONNECT_ERROR = 6;
    public static final int UNREACHABLE = 7;
    public static final int REJECTED = 8;
    public static final int ESTABLISHED = 9;
    public static final int DISCONNECTED = 10;
    public static final int DEVICE_REMOVAL = 11;
    public static final int MULTICAST_JOIN = 12;
    public static final int MULTICAST_ERROR = 13;
    public static final int ADDR_CHANGE = 14;
    public static final int TIMEWAIT_EXIT = 15;

    private static final String[] NAMES = {
        "ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST", "CONNECT_RESPONSE",
        "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED", "DISCONNECTED", "DEVICE_REMOVAL",
        "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE", "TIMEWAIT_EXIT",
    };

    private CmEventType() {
    }

    public static String name(int type) {
        return type >= 0 && type < NAMES.length ? NAMES[type] : "UNKNOWN(" + type + ")";
    }
}
