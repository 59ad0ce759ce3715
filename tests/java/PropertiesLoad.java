// Loads a properties file with java.util.Properties.load(InputStream), as the Java NameServer and its admin
// tools read namesrv.properties, and prints each key and value (sorted) as hex UTF-16 units, one pair a
// line: `java tests/java/PropertiesLoad.java FILE` (tests/config_file.rs compares it with what was written).
import java.io.FileInputStream;
import java.io.InputStream;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

public class PropertiesLoad {
    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            properties.load(in);
        }
        TreeMap<String, String> sorted = new TreeMap<>();
        for (String key : properties.stringPropertyNames()) {
            sorted.put(key, properties.getProperty(key));
        }
        for (Map.Entry<String, String> e : sorted.entrySet()) {
            System.out.println(hex(e.getKey()) + " " + hex(e.getValue()));
        }
    }

    private static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            b.append(String.format("%04x", (int) c));
        }
        return b.toString();
    }
}
