import { PNG } from 'pngjs';
import jsQR from 'jsqr';
import {
  cassoSignature,
  crc16,
  memoOf,
  readCasso,
  readSepay,
  vietQrImages,
  vietQrPayload,
  vnpayHash,
  vnpayPaymentUrl,
  vnpaySignData,
  vnpayVerified,
} from '../../../../src/jobs/topups';

describe('VietQR payload (NAPAS, EMVCo TLV)', () => {
  it('reproduces a published VietQR string: 120,000 VND to VietinBank 0011001932418, memo "ung ho lu lut"', () => {
    // From the subiz/vietqr README (Go), generated independently of this code.
    const published =
      '00020101021238570010A00000072701270006970415011300110019324180208QRIBFTTA530370454061200005802VN' +
      '62170813ung ho lu lut6304C15C';
    expect(vietQrPayload({ bin: '970415', account: '0011001932418', amount: 120_000, memo: 'ung ho lu lut' })).toBe(
      published,
    );
  });

  it('CRC-16/CCITT-FALSE: the check value of "123456789" is 29B1', () => {
    expect(crc16('123456789')).toBe('29B1');
  });

  it('renders a QR image that decodes back to the payload', async () => {
    const payload = vietQrPayload({
      bin: '970436',
      account: '0011000000000',
      amount: 50_000,
      memo: 'GWABCDEFGHIJKLMN',
    });
    const { png, svg } = await vietQrImages(payload);
    expect(svg).toMatch(/^<svg/);
    const img = PNG.sync.read(Buffer.from(png.replace(/^data:image\/png;base64,/, ''), 'base64'));
    const decoded = jsQR(new Uint8ClampedArray(img.data), img.width, img.height);
    expect(decoded?.data).toBe(payload);
  });
});

describe('bank feeds', () => {
  it("verifies Casso's published webhook v2 example signature", () => {
    // Casso's documented example: the body, its checksum key and the X-Casso-Signature it sent.
    const body = {
      error: 0,
      data: {
        id: 0,
        reference: 'MA_GIAO_DICH_THU_NGHIEM',
        description: 'giao dich thu nghiem',
        amount: 599000,
        runningBalance: 25000000,
        transactionDateTime: '2024-10-03 15:06:37',
        accountNumber: '88888888',
        bankName: 'VPBank',
        bankAbbreviation: 'VPB',
        virtualAccountNumber: '',
        virtualAccountName: '',
        counterAccountName: 'NGUYEN VAN A',
        counterAccountNumber: '8888888888',
        counterAccountBankId: '970415',
        counterAccountBankName: 'VietinBank',
      },
    };
    expect(
      cassoSignature('mgExMrjj4i7a1p8Cs6LmFbpCd8lbw4sSX4LZXPag7TKazeIogtR90tvWYTkwQbvs', '1727948258788', body),
    ).toBe(
      'ed0a4bd2e826d5cb69988cdb141e6c1a080e21f3b57eb72cd78192220042b9e7' +
        'dde0868fc667faea8e224900fa7904e7c88dfa098032fb2d6b6996856e8b7ff3',
    );
    const [t] = readCasso(body);
    expect(t).toMatchObject({ txnId: '0', direction: 'in', amount: 599000, reference: 'MA_GIAO_DICH_THU_NGHIEM' });
    expect(t.transactedAt?.toISOString()).toBe('2024-10-03T08:06:37.000Z');
    expect(readCasso({ error: 0, data: { ...body.data, id: 7, amount: -5000 } })[0].direction).toBe('out');
  });

  it("reads SePay's webhook and refuses a malformed one", () => {
    const t = readSepay({
      id: 92704,
      gateway: 'Vietcombank',
      transactionDate: '2023-03-25 14:02:37',
      accountNumber: '0123499999',
      code: null,
      content: 'chuyen tien mua iphone',
      transferType: 'in',
      transferAmount: 2277000,
      accumulated: 19077000,
      subAccount: null,
      referenceCode: 'MBVCB.3278907687',
      description: '',
    });
    expect(t).toMatchObject({ provider: 'sepay', txnId: '92704', amount: 2277000, direction: 'in' });
    expect(() => readSepay({ id: 1, transferType: 'in', transferAmount: 1.5 })).toThrow(/transferAmount/);
    expect(() => readSepay({ id: 1, transferType: 'sideways', transferAmount: 1 })).toThrow(/transferType/);
  });

  it('finds the memo in whatever the bank made of the content', () => {
    expect(memoOf({ code: null, content: 'MBVCB.123.gwabcdefghijk234.CT tu 0123 NGUYEN VAN A' })).toBe(
      'GWABCDEFGHIJK234',
    );
    expect(memoOf({ code: 'GWZZZZZZZZZZZZZZ', content: 'x' })).toBe('GWZZZZZZZZZZZZZZ');
    expect(memoOf({ code: null, content: 'no memo here GW123' })).toBeNull();
  });
});

describe('VNPay', () => {
  it('signs the sorted, URL-encoded parameters (space as +) with HMAC-SHA512', () => {
    const p = { vnp_TxnRef: 'a b', vnp_Amount: '1000000', vnp_OrderInfo: 'Nap tien/x' };
    expect(vnpaySignData(p)).toBe('vnp_Amount=1000000&vnp_OrderInfo=Nap+tien%2Fx&vnp_TxnRef=a+b');
    const hash = vnpayHash('SECRET', p);
    expect(vnpayVerified('SECRET', { ...p, vnp_SecureHash: hash, vnp_SecureHashType: 'HmacSHA512' })).toBe(true);
    expect(vnpayVerified('SECRET', { ...p, vnp_Amount: '2000000', vnp_SecureHash: hash })).toBe(false);
    expect(vnpayVerified('OTHER', { ...p, vnp_SecureHash: hash })).toBe(false);
  });

  it('builds a payment URL whose parameters verify under the merchant secret', () => {
    const url = new URL(
      vnpayPaymentUrl({
        tmnCode: 'TMN01',
        secret: 'S3CRET',
        url: 'https://sandbox.vnpayment.vn/paymentv2/vpcpay.html',
        ref: 'topup_0123',
        amount: 50_000,
        info: 'Nap tien GWABC',
        returnUrl: 'http://127.0.0.1:8080/v1/payments/vnpay/return',
        ipAddr: '127.0.0.1',
        createdAt: new Date('2026-01-01T00:00:00Z'),
        expiresAt: new Date('2026-01-01T00:15:00Z'),
      }),
    );
    const params = Object.fromEntries(url.searchParams);
    expect(params).toMatchObject({ vnp_Amount: '5000000', vnp_CreateDate: '20260101070000', vnp_Command: 'pay' });
    expect(vnpayVerified('S3CRET', params)).toBe(true);
  });
});
