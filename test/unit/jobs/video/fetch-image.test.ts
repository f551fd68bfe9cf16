import { ApiError } from '../../../../src/errors';
import { classifyAddress, isPublicAddress, parseV6 } from '../../../../src/net/ipAddress';
import {
  decodeBase64,
  detectImageType,
  MAX_IMAGE_BYTES,
  parseAllowHosts,
  resolveImage,
  validateImageBytes,
} from '../../../../src/jobs/video/fetchImage';

const PNG_1x1 = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const JPEG = Buffer.concat([
  Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]),
  Buffer.from('JFIF\0'),
  Buffer.alloc(32, 7),
]);
const WEBP = Buffer.concat([
  Buffer.from('RIFF'),
  Buffer.from([0x24, 0, 0, 0]),
  Buffer.from('WEBPVP8 '),
  Buffer.alloc(32, 1),
]);
const GIF = Buffer.concat([Buffer.from('GIF89a'), Buffer.alloc(32, 0)]);
const noNet = { allowHosts: [] as string[] };

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    return e as ApiError;
  }
  throw new Error('expected a rejection');
}

describe('detectImageType', () => {
  test.each([
    ['png', PNG_1x1, 'image/png'],
    ['jpeg', JPEG, 'image/jpeg'],
    ['webp', WEBP, 'image/webp'],
    ['gif', GIF, null],
    ['empty', Buffer.alloc(0), null],
    ['truncated png signature', PNG_1x1.subarray(0, 7), null],
    ['RIFF but not WEBP (wav)', Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WAVEfmt ')]), null],
    ['text', Buffer.from('<html>not an image</html>'), null],
  ])('%s', (_name, buf, want) => {
    expect(detectImageType(buf)).toBe(want);
  });
});

describe('validateImageBytes', () => {
  test('accepts matching or absent or generic declared types', () => {
    expect(validateImageBytes(PNG_1x1, 'image/png', 'p').mimeType).toBe('image/png');
    expect(validateImageBytes(JPEG, 'image/jpg', 'p').mimeType).toBe('image/jpeg');
    expect(validateImageBytes(JPEG, 'IMAGE/JPEG; charset=binary', 'p').mimeType).toBe('image/jpeg');
    expect(validateImageBytes(WEBP, undefined, 'p').mimeType).toBe('image/webp');
    expect(validateImageBytes(WEBP, 'application/octet-stream', 'p').mimeType).toBe('image/webp');
  });
  test('refuses a declared type that contradicts the bytes, other formats, empty and oversize images', () => {
    const mismatch = (() => {
      try {
        validateImageBytes(PNG_1x1, 'image/jpeg', 'last_frame');
      } catch (e) {
        return e as ApiError;
      }
    })();
    expect(mismatch).toMatchObject({ status: 400, param: 'last_frame', code: 'image_type_mismatch' });
    expect(() => validateImageBytes(GIF, 'image/gif', 'x')).toThrow(
      expect.objectContaining({ code: 'invalid_image_format', param: 'x' }),
    );
    expect(() => validateImageBytes(Buffer.alloc(0), undefined, 'x')).toThrow(
      expect.objectContaining({ status: 400, param: 'x' }),
    );
    const big = Buffer.concat([PNG_1x1, Buffer.alloc(100)]);
    expect(() => validateImageBytes(big, undefined, 'x', 100)).toThrow(
      expect.objectContaining({ code: 'image_too_large' }),
    );
    expect(validateImageBytes(big, undefined, 'x', big.length).bytes.length).toBe(big.length);
  });
});

describe('decodeBase64', () => {
  test('standard, URL-safe, unpadded and wrapped base64 decode', () => {
    const raw = Buffer.from([0xfb, 0xff, 0xbf, 1, 2]);
    expect(decodeBase64(raw.toString('base64'), 'p')).toEqual(raw);
    expect(decodeBase64(raw.toString('base64url'), 'p')).toEqual(raw);
    expect(decodeBase64('+/+/\n+/+/', 'p')).toEqual(Buffer.from('+/+/+/+/', 'base64'));
  });
  test.each(['abc$', 'a', 'ab=c', '=abc', 'ab==cd==', 'a+b_', 'abcde='])('refuses malformed %j', (s) => {
    expect(() => decodeBase64(s, 'input_reference')).toThrow(
      expect.objectContaining({ code: 'invalid_base64', param: 'input_reference' }),
    );
  });
  test('refuses oversize data before decoding it', () => {
    const limit = 30;
    expect(decodeBase64(Buffer.alloc(30).toString('base64'), 'p', limit).length).toBe(30);
    expect(() => decodeBase64(Buffer.alloc(31).toString('base64'), 'p', limit)).toThrow(
      expect.objectContaining({ code: 'image_too_large' }),
    );
    expect(() => decodeBase64('A'.repeat(20 * 1024 * 1024), 'p')).toThrow(
      expect.objectContaining({ code: 'image_too_large' }),
    );
  });
});

describe('resolveImage without network', () => {
  test('data URIs of each format', async () => {
    for (const [buf, mime] of [
      [PNG_1x1, 'image/png'],
      [JPEG, 'image/jpeg'],
      [WEBP, 'image/webp'],
    ] as const) {
      const r = await resolveImage(`data:${mime};base64,${buf.toString('base64')}`, 'input_reference', noNet);
      expect(r).toEqual({ bytes: buf, mimeType: mime });
    }
    // Parameters before ;base64 and a missing media type are fine; the bytes decide.
    expect(
      (await resolveImage(`data:image/png;name=a.png;base64,${PNG_1x1.toString('base64')}`, 'p', noNet)).mimeType,
    ).toBe('image/png');
    expect((await resolveImage(`data:;base64,${WEBP.toString('base64')}`, 'p', noNet)).mimeType).toBe('image/webp');
  });

  test('the {bytesBase64Encoded, mimeType} object form', async () => {
    expect(
      await resolveImage({ bytesBase64Encoded: JPEG.toString('base64'), mimeType: 'image/jpeg' }, 'p', noNet),
    ).toEqual({ bytes: JPEG, mimeType: 'image/jpeg' });
    expect((await resolveImage({ bytesBase64Encoded: PNG_1x1.toString('base64') }, 'p', noNet)).mimeType).toBe(
      'image/png',
    );
  });

  test.each([
    ['mismatched data URI mime', `data:image/jpeg;base64,${PNG_1x1.toString('base64')}`, 'image_type_mismatch'],
    [
      'mismatched object mime',
      { bytesBase64Encoded: WEBP.toString('base64'), mimeType: 'image/png' },
      'image_type_mismatch',
    ],
    ['gif data URI', `data:image/gif;base64,${GIF.toString('base64')}`, 'invalid_image_format'],
    ['non-base64 data URI', 'data:image/png,%89PNG', 'invalid_data_uri'],
    ['malformed data URI', 'data:image/png;base64', 'invalid_data_uri'],
    ['bad base64 in data URI', 'data:image/png;base64,@@@@', 'invalid_base64'],
    ['empty object', {}, 'invalid_value'],
    ['object with numeric mimeType', { bytesBase64Encoded: PNG_1x1.toString('base64'), mimeType: 5 }, 'invalid_value'],
    ['array', [PNG_1x1.toString('base64')], 'invalid_value'],
    ['number', 42, 'invalid_value'],
    ['null', null, 'invalid_value'],
    ['plain string', 'just some text', 'invalid_value'],
    ['file URL', 'file:///etc/passwd', 'invalid_value'],
    ['ftp URL', 'ftp://example.com/a.png', 'invalid_value'],
    ['URL with credentials', 'http://user:pw@example.com/a.png', 'invalid_image_url'],
  ])('refuses %s with a 400 naming the parameter', async (_name, input, code) => {
    const e = await rejection(resolveImage(input, 'reference_images[2]', noNet));
    expect(e).toMatchObject({ status: 400, param: 'reference_images[2]', code });
  });

  test('the 10 MB limit applies to the decoded size', async () => {
    const exact = Buffer.concat([PNG_1x1, Buffer.alloc(MAX_IMAGE_BYTES - PNG_1x1.length)]);
    expect((await resolveImage(`data:image/png;base64,${exact.toString('base64')}`, 'p', noNet)).bytes.length).toBe(
      MAX_IMAGE_BYTES,
    );
    const over = Buffer.concat([exact, Buffer.alloc(1)]);
    const e = await rejection(
      resolveImage({ bytesBase64Encoded: over.toString('base64'), mimeType: 'image/png' }, 'last_frame', noNet),
    );
    expect(e).toMatchObject({ status: 400, param: 'last_frame', code: 'image_too_large' });
  });
});

describe('URL vetting before any connection (injected DNS answers)', () => {
  const lookupTo =
    (...addresses: string[]) =>
    async () =>
      addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

  test.each([
    ['loopback', ['127.0.0.1']],
    ['private', ['10.1.2.3']],
    ['cloud metadata', ['169.254.169.254']],
    ['IPv6 unique local', ['fd12::1']],
    ['IPv4-mapped loopback', ['::ffff:127.0.0.1']],
    ['one private among public answers', ['93.184.216.34', '192.168.1.10']],
  ])('a host resolving to %s is refused', async (_name, addrs) => {
    const e = await rejection(
      resolveImage('https://images.example.com/a.png', 'input_reference', {
        allowHosts: [],
        lookup: lookupTo(...addrs),
      }),
    );
    expect(e).toMatchObject({ status: 400, param: 'input_reference', code: 'image_url_forbidden' });
    expect(e.message).not.toContain(addrs[addrs.length - 1]); // internal addresses are not echoed back
  });

  test.each([
    'http://127.0.0.1/a.png',
    'http://127.1/a.png',
    'http://0x7f000001/a.png',
    'http://2130706433/a.png',
    'http://0/a.png',
    'http://[::1]/a.png',
    'http://[::ffff:7f00:1]/a.png',
    'http://[::ffff:169.254.169.254]/',
    'http://169.254.169.254/latest/meta-data/',
    'http://[fe80::1]/',
    'http://10.0.0.1:8080/',
    'http://100.64.0.1/',
    'http://224.0.0.1/',
    'http://[64:ff9b::a9fe:a9fe]/',
  ])('the literal address URL %s is refused', async (url) => {
    let looked = 0;
    const e = await rejection(
      resolveImage(url, 'p', {
        allowHosts: [],
        lookup: async () => {
          looked++;
          return [];
        },
      }),
    );
    expect(e).toMatchObject({ status: 400, code: 'image_url_forbidden' });
    expect(looked).toBe(0);
  });

  test('a DNS answer that never comes is cut off by the fetch timeout', async () => {
    const e = await rejection(
      resolveImage('https://slow-dns.example.com/a.png', 'p', {
        allowHosts: [],
        timeoutMs: 200,
        lookup: () => new Promise(() => {}),
      }),
    );
    expect(e).toMatchObject({ status: 400, code: 'image_fetch_failed' });
    expect(e.message).toMatch(/timed out/);
  });

  test('an unresolvable host is a 400', async () => {
    const e = await rejection(
      resolveImage('https://nx.example.com/a.png', 'p', {
        allowHosts: [],
        lookup: async () => {
          throw new Error('ENOTFOUND');
        },
      }),
    );
    expect(e).toMatchObject({ status: 400, code: 'image_fetch_failed' });
  });
});

describe('parseAllowHosts', () => {
  test('hosts, host:port, IPv6 forms, normalisation', () => {
    expect(
      parseAllowHosts([
        'localhost',
        '127.0.0.1:8080',
        'Images.Example.COM:443',
        '[::1]:9000',
        '::1',
        '127.1',
        ' ',
        'bad host:1',
        'x:notaport',
      ]),
    ).toEqual([
      { host: 'localhost', port: null },
      { host: '127.0.0.1', port: 8080 },
      { host: 'images.example.com', port: 443 },
      { host: '::1', port: 9000 },
      { host: '::1', port: null },
      { host: '127.0.0.1', port: null },
    ]);
  });
});

describe('classifyAddress', () => {
  test.each([
    // IPv4 public
    ['8.8.8.8', 'public'],
    ['1.1.1.1', 'public'],
    ['93.184.216.34', 'public'],
    ['172.15.255.255', 'public'],
    ['172.32.0.0', 'public'],
    ['100.63.255.255', 'public'],
    ['100.128.0.0', 'public'],
    ['192.167.255.255', 'public'],
    ['192.169.0.0', 'public'],
    ['169.253.255.255', 'public'],
    ['169.255.0.0', 'public'],
    ['11.0.0.0', 'public'],
    ['9.255.255.255', 'public'],
    ['126.255.255.255', 'public'],
    ['128.0.0.0', 'public'],
    ['223.255.255.255', 'public'],
    ['198.17.255.255', 'public'],
    ['198.20.0.0', 'public'],
    // IPv4 non-public
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.0', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.0', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.0.1', 'private'],
    ['192.168.255.255', 'private'],
    ['100.64.0.0', 'shared'],
    ['100.127.255.255', 'shared'],
    ['169.254.0.1', 'link-local'],
    ['169.254.169.254', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.254', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['198.18.0.1', 'reserved'],
    ['198.19.255.255', 'reserved'],
    ['192.88.99.1', 'reserved'],
    // IPv6 public
    ['2606:4700:4700::1111', 'public'],
    ['2001:4860:4860::8888', 'public'],
    ['2a00:1450:4001:81b::200e', 'public'],
    ['2400:cb00::1', 'public'],
    ['[2606:4700::1]', 'public'],
    ['3ffe::1', 'public'],
    // IPv6 non-public
    ['::', 'unspecified'],
    ['0:0:0:0:0:0:0:0', 'unspecified'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['[::1]', 'loopback'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['fc00::1', 'private'],
    ['fd00::1', 'private'],
    ['fdff:ffff::1', 'private'],
    ['fec0::1', 'private'],
    ['ff02::1', 'multicast'],
    ['ff05::1:3', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['2001::1', 'reserved'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved'],
    ['2002:7f00:1::1', 'reserved'],
    ['100::1', 'reserved'],
    ['64:ff9b:1::1', 'reserved'],
    ['4000::1', 'reserved'],
    ['1::', 'reserved'],
    // IPv4 embedded in IPv6 is judged by the IPv4 address
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::FFFF:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::ffff:0.0.0.0', 'unspecified'],
    ['::ffff:8.8.8.8', 'public'],
    ['0:0:0:0:0:ffff:c0a8:0101', 'private'],
    ['::ffff:0:10.0.0.1', 'private'],
    ['::127.0.0.1', 'loopback'],
    ['::8.8.8.8', 'reserved'],
    ['64:ff9b::127.0.0.1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['64:ff9b::808:808', 'public'],
    // Not addresses
    ['', 'invalid'],
    ['localhost', 'invalid'],
    ['01.2.3.4', 'invalid'],
    ['1.2.3', 'invalid'],
    ['256.1.1.1', 'invalid'],
    ['1.2.3.4.5', 'invalid'],
    ['::g', 'invalid'],
    ['1:2:3:4:5:6:7:8:9', 'invalid'],
    ['1::2::3', 'invalid'],
    ['0x7f.0.0.1', 'invalid'],
  ])('%s is %s', (ip, want) => {
    expect(classifyAddress(ip)).toBe(want);
    expect(isPublicAddress(ip)).toBe(want === 'public');
  });

  test('parseV6 expands compressed forms and dotted tails', () => {
    expect(parseV6('1::')).toEqual([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(parseV6('::2:3:4:5:6:7:8')).toEqual([0, 2, 3, 4, 5, 6, 7, 8]);
    expect(parseV6('1:2:3:4:5:6:1.2.3.4')).toEqual([1, 2, 3, 4, 5, 6, 0x102, 0x304]);
    expect(parseV6('::ffff:1.2.3.4')).toEqual([0, 0, 0, 0, 0, 0xffff, 0x102, 0x304]);
    expect(parseV6('1.2.3.4')).toBeNull();
  });
});
