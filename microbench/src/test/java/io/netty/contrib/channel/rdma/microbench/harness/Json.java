package io.netty.contrib.channel.rdma.microbench.harness;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A strict JSON reader (RFC 8259) for the tests: objects become maps, arrays lists, numbers doubles. Anything
 * malformed, or text after the value, is an {@link IllegalArgumentException} naming the offset.
 */
final class Json {
    private final String s;
    private int i;

    private Json(String s) {
        this.s = s;
    }

    static Object parse(String text) {
        Json p = new Json(text);
        Object v = p.value();
        p.space();
        if (p.i != text.length()) {
            throw p.error("text after the value");
        }
        return v;
    }

    private Object value() {
        space();
        if (i >= s.length()) {
            throw error("value expected");
        }
        char c = s.charAt(i);
        return switch (c) {
            case '{' -> object();
            case '[' -> array();
            case '"' -> string();
            case 't' -> literal("true", Boolean.TRUE);
            case 'f' -> literal("false", Boolean.FALSE);
            case 'n' -> literal("null", null);
            default -> number();
        };
    }

    private Map<String, Object> object() {
        Map<String, Object> map = new LinkedHashMap<>();
        i++;
        space();
        if (peek('}')) {
            i++;
            return map;
        }
        for (;;) {
            space();
            if (!peek('"')) {
                throw error("member name expected");
            }
            String name = string();
            space();
            expect(':');
            if (map.put(name, value()) != null) {
                throw error("duplicate member " + name);
            }
            space();
            if (peek(',')) {
                i++;
            } else {
                expect('}');
                return map;
            }
        }
    }

    private List<Object> array() {
        List<Object> list = new ArrayList<>();
        i++;
        space();
        if (peek(']')) {
            i++;
            return list;
        }
        for (;;) {
            list.add(value());
            space();
            if (peek(',')) {
                i++;
            } else {
                expect(']');
                return list;
            }
        }
    }

    private String string() {
        StringBuilder b = new StringBuilder();
        i++;
        while (i < s.length()) {
            char c = s.charAt(i++);
            if (c == '"') {
                return b.toString();
            }
            if (c < 0x20) {
                throw error("control character in string");
            }
            if (c != '\\') {
                b.append(c);
                continue;
            }
            if (i >= s.length()) {
                break;
            }
            char e = s.charAt(i++);
            switch (e) {
                case '"', '\\', '/' -> b.append(e);
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case 'n' -> b.append('\n');
                case 'r' -> b.append('\r');
                case 't' -> b.append('\t');
                case 'u' -> {
                    if (i + 4 > s.length()) {
                        throw error("short \\u escape");
                    }
                    b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    i += 4;
                }
                default -> throw error("bad escape \\" + e);
            }
        }
        throw error("unterminated string");
    }

    private Double number() {
        int start = i;
        if (peek('-')) {
            i++;
        }
        if (peek('0')) {
            i++;
        } else if (digit()) {
            while (digit()) {
                i++;
            }
        } else {
            throw error("number expected");
        }
        if (peek('.')) {
            i++;
            if (!digit()) {
                throw error("digit expected after the decimal point");
            }
            while (digit()) {
                i++;
            }
        }
        if (peek('e') || peek('E')) {
            i++;
            if (peek('+') || peek('-')) {
                i++;
            }
            if (!digit()) {
                throw error("digit expected in the exponent");
            }
            while (digit()) {
                i++;
            }
        }
        return Double.parseDouble(s.substring(start, i));
    }

    private Object literal(String word, Object value) {
        if (!s.startsWith(word, i)) {
            throw error(word + " expected");
        }
        i += word.length();
        return value;
    }

    private boolean digit() {
        return i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9';
    }

    private boolean peek(char c) {
        return i < s.length() && s.charAt(i) == c;
    }

    private void expect(char c) {
        if (!peek(c)) {
            throw error("'" + c + "' expected");
        }
        i++;
    }

    private void space() {
        while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) {
            i++;
        }
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("malformed JSON at offset " + i + ": " + what);
    }
}
