package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.VarHandle;

/**
 * errno as the bindings see it: the per-thread call-state buffer that downcalls made with
 * {@code Linker.Option.captureCallState("errno")} fill, and the symbolic names of the common values.
 */
public final class Errno {
    public static final int EPERM = 1;
    public static final int ENOENT = 2;
    public static final int EINTR = 4;
    public static final int EIO = 5;
    public static final int EBADF = 9;
    public static final int EAGAIN = 11;
    public static final int ENOMEM = 12;
    public static final int EACCES = 13;
    public static final int EFAULT = 14;
    public static final int EBUSY = 16;
    public static final int EEXIST = 17;
    public static final int ENODEV = 19;
    public static final int EINVAL = 22;
    public static final int ENOSPC = 28;
    public static final int ENOSYS = 38;
    public static final int ENODATA = 61;
    public static final int EOPNOTSUPP = 95;
    public static final int EADDRINUSE = 98;
    public static final int EADDRNOTAVAIL = 99;
    public static final int ECONNRESET = 104;
    public static final int ENOTCONN = 107;
    public static final int ETIMEDOUT = 110;
    public static final int ECONNREFUSED = 111;

    static final Linker.Option CAPTURE = Linker.Option.captureCallState("errno");
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final ThreadLocal<MemorySegment> STATE =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));

    private static final String[] NAMES = new String[134];

    static {
        String[] table = {
            "1 EPERM", "2 ENOENT", "3 ESRCH", "4 EINTR", "5 EIO", "6 ENXIO", "7 E2BIG", "9 EBADF", "11 EAGAIN",
            "12 ENOMEM", "13 EACCES", "14 EFAULT", "16 EBUSY", "17 EEXIST", "19 ENODEV", "20 ENOTDIR",
            "22 EINVAL", "23 ENFILE", "24 EMFILE", "28 ENOSPC", "32 EPIPE", "34 ERANGE", "35 EDEADLK",
            "38 ENOSYS", "61 ENODATA", "62 ETIME", "71 EPROTO", "75 EOVERFLOW", "90 EMSGSIZE",
            "93 EPROTONOSUPPORT", "95 EOPNOTSUPP", "97 EAFNOSUPPORT", "98 EADDRINUSE", "99 EADDRNOTAVAIL",
            "100 ENETDOWN", "101 ENETUNREACH", "103 ECONNABORTED", "104 ECONNRESET", "105 ENOBUFS",
            "106 EISCONN", "107 ENOTCONN", "110 ETIMEDOUT", "111 ECONNREFUSED", "112 EHOSTDOWN",
            "113 EHOSTUNREACH", "114 EALREADY", "115 EINPROGRESS", "125 ECANCELED",
        };
        for (String entry : table) {
            int space = entry.indexOf(' ');
            NAMES[Integer.parseInt(entry.substring(0, space))] = entry.substring(space + 1);
        }
    }

    private Errno() {
    }

    /** The symbolic name of {@code errno}, e.g. {@code "EINVAL"}, or {@code "errno 200"} if unknown. */
    public static String name(int errno) {
        String name = errno >= 0 && errno < NAMES.length ? NAMES[errno] : null;
        return name != null ? name : "errno " + errno;
    }

    /** {@code "EINVAL (22)"}. */
    public static String describe(int errno) {
        return name(errno) + " (" + errno + ")";
    }

    /** This thread's call-state buffer: pass it as the first argument of a capturing downcall. */
    static MemorySegment state() {
        return STATE.get();
    }

    /** The errno the last capturing downcall on this thread left in {@code state}. */
    static int get(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    /** The errno the last capturing downcall on this thread left. */
    static int last() {
        return get(STATE.get());
    }
}
